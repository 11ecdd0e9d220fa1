import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { buildProxyModel } from './model.js';
import type { ModelOptions } from './model.js';
import { node, service, slice } from './testing/objects.js';

const OPTIONS: ModelOptions = { families: ['ipv4', 'ipv6'], nodePortBindOnAllIp: false, serviceProxyName: 'kube-router' };

function model(services: V1Service[], slices: Record<string, V1EndpointSlice[]> = {}, options: Partial<ModelOptions> = {}, zone?: string) {
  return buildProxyModel(
    { services, slicesFor: (_namespace, name) => slices[name] ?? [], node: node([{ type: 'InternalIP', address: '192.168.1.1' }, { type: 'InternalIP', address: 'fd00::1' }], zone), nodeName: 'node-a' },
    { ...OPTIONS, ...options },
  );
}

describe('buildProxyModel', () => {
  it('plans one Service port per family with its addresses, NodePort and endpoints of that family', () => {
    const result = model(
      [service('web', { clusterIPs: ['10.96.0.10', 'fd00:96::10'], type: 'NodePort', ports: [{ name: 'http', port: 80, nodePort: 30080 }], externalIPs: ['203.0.113.1', '2001:db8::1'] })],
      { web: [slice([{ ip: '10.244.0.5' }]), slice([{ ip: 'fd00:244::5' }], undefined, 'IPv6')] },
    );
    expect(result.problems).toEqual([]);
    expect(result.ports.ipv4).toHaveLength(1);
    expect(result.ports.ipv4[0]).toMatchObject({ clusterIp: '10.96.0.10', nodePort: 30080, externalIps: ['203.0.113.1'], externallyAccessible: true });
    expect(result.ports.ipv4[0]?.endpoints.cluster.map((endpoint) => endpoint.address)).toEqual(['10.244.0.5']);
    expect(result.ports.ipv6[0]).toMatchObject({ clusterIp: 'fd00:96::10', externalIps: ['2001:db8::1'] });
    expect(result.ports.ipv6[0]?.endpoints.cluster.map((endpoint) => endpoint.address)).toEqual(['fd00:244::5']);
    expect(result.nodePortAddresses).toEqual({ ipv4: ['192.168.1.1'], ipv6: ['fd00::1'] });
  });

  it('skips what kube-router skips: headless, ExternalName, another proxy, no ClusterIP', () => {
    const result = model([
      service('headless', { clusterIP: 'None' }),
      service('external', { type: 'ExternalName', clusterIP: '' }),
      service('other', {}, { labels: { 'service.kubernetes.io/service-proxy-name': 'someone-else' } }),
      service('labelled', {}, { labels: { 'service.kubernetes.io/headless': '' } }),
    ]);
    expect(result.services).toBe(0);
    expect(result.problems).toEqual([]);
  });

  it('refuses an IPVS-only scheduler or DSR with a problem of that Service alone', () => {
    const result = model([
      service('sh', { clusterIP: '10.96.0.11' }, { annotations: { 'kube-router.io/service.scheduler': 'sh' } }),
      service('dsr', { clusterIP: '10.96.0.12' }, { annotations: { 'kube-router.io/service.dsr': 'tunnel' } }),
      service('rr', { clusterIP: '10.96.0.13' }, { annotations: { 'kube-router.io/service.scheduler': 'rr' } }),
    ]);
    expect(result.problems.map((problem) => [problem.owner, problem.reason])).toEqual([
      ['default/dsr', 'UnsupportedServiceAnnotation'],
      ['default/sh', 'UnsupportedServiceAnnotation'],
    ]);
    expect(result.ports.ipv4.map((plan) => plan.owner)).toEqual(['default/rr']);
  });

  it('uses serving terminating endpoints only when none is ready, separately for the Local policy', () => {
    const terminatingOnly = model([service('web')], { web: [slice([{ ip: '10.244.0.5', ready: false, serving: true, terminating: true }, { ip: '10.244.0.6', ready: false, serving: false, terminating: true }])] });
    expect(terminatingOnly.ports.ipv4[0]?.endpoints.cluster.map((endpoint) => endpoint.address)).toEqual(['10.244.0.5']);
    const mixed = model([service('web', { internalTrafficPolicy: 'Local' })], {
      web: [slice([{ ip: '10.244.0.5', node: 'node-b' }, { ip: '10.244.0.6', ready: false, serving: true, terminating: true }])],
    });
    expect(mixed.ports.ipv4[0]?.endpoints.local.map((endpoint) => endpoint.address)).toEqual(['10.244.0.6']);
  });

  it('follows topology hints for this node or zone when every ready endpoint has one', () => {
    const slices = { web: [slice([{ ip: '10.244.0.5', zones: ['z1'] }, { ip: '10.244.1.5', node: 'node-b', zones: ['z2'] }])] };
    expect(model([service('web')], slices, {}, 'z2').ports.ipv4[0]?.endpoints.cluster.map((endpoint) => endpoint.address)).toEqual(['10.244.1.5']);
    expect(model([service('web')], slices, {}, 'z3').ports.ipv4[0]?.endpoints.cluster).toHaveLength(2);
  });

  it('keeps LoadBalancer IPs except ipMode Proxy and skiplbips; source ranges per family; a bad range refuses the Service', () => {
    const status = { loadBalancer: { ingress: [{ ip: '198.51.100.1' }, { ip: '198.51.100.2', ipMode: 'Proxy' }, { ip: '2001:db8::9' }] } };
    const lb = service('lb', { type: 'LoadBalancer', loadBalancerSourceRanges: ['192.168.1.0/24', '2001:db8:1::/48'] }, { status });
    const result = model([lb, service('skip', { clusterIP: '10.96.0.20', type: 'LoadBalancer' }, { status, annotations: { 'kube-router.io/service.skiplbips': 'true' } })]);
    const plan = result.ports.ipv4.find((entry) => entry.owner === 'default/lb');
    expect(plan).toMatchObject({ loadBalancerIps: ['198.51.100.1'], sourceRanges: ['192.168.1.0/24'], allowLoadBalancerIpsAsSources: true });
    expect(result.ports.ipv4.find((entry) => entry.owner === 'default/skip')?.loadBalancerIps).toEqual([]);
    const bad = model([service('lb', { type: 'LoadBalancer', loadBalancerSourceRanges: ['10.0.0.0/33'] }, { status })]);
    expect(bad.problems.map((problem) => problem.reason)).toEqual(['InvalidLoadBalancerSourceRange']);
    expect(bad.ports.ipv4).toEqual([]);
  });

  it('allows LoadBalancer IPs as sources when a node IP is in the ranges, with nodePortBindOnAllIp too', () => {
    const status = { loadBalancer: { ingress: [{ ip: '198.51.100.1' }] } };
    const lb = service('lb', { type: 'LoadBalancer', loadBalancerSourceRanges: ['192.168.1.0/24'] }, { status });
    const plan = model([lb], {}, { nodePortBindOnAllIp: true }).ports.ipv4[0];
    expect(plan).toMatchObject({ firewalled: true, allowLoadBalancerIpsAsSources: true });
    expect(model([lb], {}, { nodePortBindOnAllIp: true }).nodePortAddresses).toEqual({ ipv4: [], ipv6: [] });
  });

  it('leaves strict validation’s refused addresses out with a warning, not a failure', () => {
    const result = model([service('ext', { externalIPs: ['203.0.113.1', '192.0.2.1'] })], {}, { validation: { externalIpRanges: ['203.0.113.0/24'], loadBalancerIpRanges: [], clusterIpRanges: ['10.96.0.0/12'] } });
    expect(result.ports.ipv4[0]?.externalIps).toEqual(['203.0.113.1']);
    expect(result.refused.map((entry) => entry.message)).toEqual([expect.stringContaining('192.0.2.1')]);
    expect(result.problems).toEqual([]);
  });

  it('gives an address two Services claim to the first by name; the other is a problem', () => {
    const result = model([service('b', { clusterIP: '10.96.0.10' }), service('a', { clusterIP: '10.96.0.10' })]);
    expect(result.ports.ipv4.map((plan) => plan.owner)).toEqual(['default/a']);
    expect(result.problems).toEqual([expect.objectContaining({ owner: 'default/b', reason: 'DuplicateServiceAddress' })]);
  });

  it('reports bad input as problems of its Service: protocol, ports, addresses, affinity timeout', () => {
    const result = model([
      service('proto', { clusterIP: '10.96.0.1', ports: [{ port: 80, protocol: 'ICMP' }] }),
      service('port', { clusterIP: '10.96.0.2', ports: [{ port: 70_000 }] }),
      service('addr', { clusterIP: '10.96.0.3', externalIPs: ['010.0.0.1'] }),
      service('affinity', { clusterIP: '10.96.0.4', sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 0 } } }),
    ]);
    expect(result.problems.map((problem) => `${problem.owner} ${problem.reason}`).sort()).toEqual([
      'default/addr InvalidServiceAddress',
      'default/affinity InvalidServiceAffinity',
      'default/port InvalidServicePort',
      'default/proto UnsupportedProtocol',
    ]);
    expect(result.ports.ipv4.map((plan) => plan.owner)).toEqual(['default/addr']);
  });

  it('starts a health check server for externalTrafficPolicy Local LoadBalancers, counting local ready endpoints', () => {
    const result = model([service('lb', { type: 'LoadBalancer', externalTrafficPolicy: 'Local', healthCheckNodePort: 32000, ports: [{ name: 'http', port: 80, nodePort: 30080 }] })], {
      lb: [slice([{ ip: '10.244.0.5' }, { ip: '10.244.1.5', node: 'node-b' }])],
    });
    expect(result.healthChecks).toEqual([{ owner: 'default/lb', port: 32000, localEndpoints: 1 }]);
  });
});
