import { describe, expect, it } from 'vitest';
import { nodePodCidrs } from './node-pod-cidrs.js';

describe('nodePodCidrs', () => {
  it("reads kube-router's annotations before the spec, as kube-router does", () => {
    const spec = { podCIDR: '10.244.0.0/24', podCIDRs: ['10.244.0.0/24', 'fd00:10:244::/64'] };
    expect(nodePodCidrs({ spec })).toEqual(['10.244.0.0/24', 'fd00:10:244::/64']);
    expect(nodePodCidrs({ spec: { podCIDR: '10.244.0.0/24' } })).toEqual(['10.244.0.0/24']);
    expect(nodePodCidrs({ metadata: { annotations: { 'kube-router.io/pod-cidrs': '10.1.0.0/24, fd00:1::/64' } }, spec })).toEqual([
      '10.1.0.0/24',
      'fd00:1::/64',
    ]);
    expect(nodePodCidrs({ metadata: { annotations: { 'kube-router.io/pod-cidr': '10.2.0.0/24' } }, spec })).toEqual(['10.2.0.0/24']);
    expect(nodePodCidrs({ spec: { podCIDRs: ['fd00:0010:0244:0000::/64'] } })).toEqual(['fd00:10:244::/64']);
    expect(nodePodCidrs(undefined)).toEqual([]);
  });

  it('names the Node and the field of a CIDR that does not parse or has host bits set', () => {
    expect(() => nodePodCidrs({ metadata: { name: 'n1', annotations: { 'kube-router.io/pod-cidrs': '10.0.0.0/33' } } })).toThrow(
      'node n1: annotation kube-router.io/pod-cidrs: not a CIDR: "10.0.0.0/33"',
    );
    expect(() => nodePodCidrs({ metadata: { name: 'n2' }, spec: { podCIDRs: ['10.244.1.5/24'] } })).toThrow(
      'node n2: spec.podCIDRs: 10.244.1.5/24 is not a network address (10.244.1.0/24)',
    );
  });

  it('reads a pod CIDR strictly: 010.244.0.0/24 was 8.244.0.0/24, ::1.2.3.0/120 an IPv4 network', () => {
    expect(() => nodePodCidrs({ metadata: { name: 'n1' }, spec: { podCIDRs: ['010.244.0.0/24'] } })).toThrow('not a CIDR: "010.244.0.0/24"');
    expect(nodePodCidrs({ metadata: { name: 'n1' }, spec: { podCIDRs: ['::1.2.3.0/120'] } })).toEqual(['::102:300/120']);
  });
});
