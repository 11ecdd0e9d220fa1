import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { DesiredPeer } from './nodes.js';
import { internalPeerConfigs } from './peering.js';
import { ReflectorRoleState, reflectorRole } from './route-reflector.js';

const node = (name: string, annotations: Record<string, string> = {}): V1Node => ({ metadata: { name, annotations } });

describe('reflectorRole', () => {
  it('reads rr.server before rr.client, with a number or an IPv4 address as cluster id', () => {
    expect(reflectorRole(node('a'))).toEqual({ kind: 'none' });
    expect(reflectorRole(node('a', { 'kube-router.io/rr.server': '42' }))).toEqual({ kind: 'server', clusterId: '0.0.0.42' });
    expect(reflectorRole(node('a', { 'kube-router.io/rr.client': '0x0a000001' }))).toEqual({ kind: 'client', clusterId: '10.0.0.1' });
    expect(reflectorRole(node('a', { 'kube-router.io/rr.client': '1.2.3.4', 'kube-router.io/rr.server': '1.2.3.4' }))).toEqual({
      kind: 'server',
      clusterId: '1.2.3.4',
    });
  });

  it.each(['', 'cluster-a', '4294967296', '-1', '1.2.3'])('rejects the cluster id %j', (value) => {
    expect(() => reflectorRole(node('a', { 'kube-router.io/rr.server': value }))).toThrow('kube-router.io/rr.server');
  });
});

describe('ReflectorRoleState', () => {
  it('follows the annotations, and keeps the last good role (with a Warning) while a value does not parse', () => {
    const warnings: string[] = [];
    const warn = (_node: V1Node, reason: string, message: string) => void warnings.push(`${reason}: ${message}`);
    const role = new ReflectorRoleState();
    expect(role.current).toEqual({ kind: 'none' });
    role.refresh(node('a', { 'kube-router.io/rr.client': '1' }), warn);
    expect(role.current).toEqual({ kind: 'client', clusterId: '0.0.0.1' });
    expect(() => role.refresh(node('a', { 'kube-router.io/rr.client': 'one' }), warn)).toThrow('kube-router.io/rr.client');
    expect(role.current).toEqual({ kind: 'client', clusterId: '0.0.0.1' });
    expect(warnings).toEqual([expect.stringMatching(/^InvalidRouteReflectorAnnotation: keeping route reflector role client: /)]);
  });
});

describe('internalPeerConfigs with route reflection', () => {
  const nodes = new Map([
    ['rr', node('rr', { 'kube-router.io/rr.server': '1' })],
    ['c1', node('c1', { 'kube-router.io/rr.client': '1' })],
    ['plain', node('plain')],
  ]);
  const peers: DesiredPeer[] = [
    { node: 'rr', address: '10.0.0.1', asn: 64_512, families: ['AFI_IP'] },
    { node: 'c1', address: '10.0.0.2', asn: 64_512, families: ['AFI_IP'] },
    { node: 'plain', address: '10.0.0.3', asn: 64_512, families: ['AFI_IP'] },
  ];
  const settings = { bgpPort: 179, holdTimeSeconds: 90, peerMultihopTtl: 0 };
  const plan = (role: Parameters<typeof internalPeerConfigs>[0]['role']) =>
    internalPeerConfigs({ peers, role, nodeOf: (name) => nodes.get(name), localAddress: '10.0.0.9', settings });

  it('a client peers only with reflectors', () => {
    const { wanted, skipped } = plan({ kind: 'client', clusterId: '0.0.0.1' });
    expect(wanted.map((p) => p.config.neighborAddress)).toEqual(['10.0.0.1']);
    expect(wanted[0]!.config.routeReflectorClient).toBeUndefined();
    expect(skipped.map((s) => s.node)).toEqual(['c1', 'plain']);
  });

  it('a reflector marks its clients with its cluster id and peers normally with the rest', () => {
    const { wanted } = plan({ kind: 'server', clusterId: '0.0.0.1' });
    expect(wanted.map((p) => [p.config.neighborAddress, p.config.routeReflectorClient])).toEqual([
      ['10.0.0.1', undefined],
      ['10.0.0.2', { clusterId: '0.0.0.1' }],
      ['10.0.0.3', undefined],
    ]);
  });

  it('without a role: the full mesh, with graceful restart when on', () => {
    const gracefulRestart = { restartTimeSeconds: 90, deferralTimeSeconds: 360 };
    const { wanted } = internalPeerConfigs({ peers, role: { kind: 'none' }, nodeOf: (n) => nodes.get(n), localAddress: '10.0.0.9', settings: { ...settings, gracefulRestart } });
    expect(wanted).toHaveLength(3);
    expect(wanted.every((p) => p.config.gracefulRestart === gracefulRestart && p.config.localAddress === '10.0.0.9' && !p.config.routeReflectorClient)).toBe(true);
  });
});
