import type { V1EndpointSlice, V1Node, V1Service, V1ServicePort } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { buildProxyModel } from './model.js';
import type { ModelInputs, ProxyModel, ProxyModelCache } from './model.js';

const NODE = 'n1';
const node: V1Node = { metadata: { name: NODE }, status: { addresses: [{ type: 'InternalIP', address: '192.168.1.10' }, { type: 'InternalIP', address: 'fd00:1::10' }, { type: 'Hostname', address: 'n1' }] } };

function svc(name: string, spec: V1Service['spec'], extra: Partial<V1Service['metadata']> = {}, status?: V1Service['status']): V1Service {
  return { metadata: { namespace: 'ns', name, ...extra }, spec: { clusterIP: '10.96.0.1', ports: [{ name: 'http', protocol: 'TCP', port: 80 }], ...spec }, ...(status && { status }) };
}
function slice(name: string, type: 'IPv4' | 'IPv6', endpoints: { ip: string; node?: string; ready?: boolean; serving?: boolean; terminating?: boolean }[], port = 8080, protocol = 'TCP'): V1EndpointSlice {
  return {
    addressType: type,
    metadata: { namespace: 'ns', name: `${name}-${type}`, labels: { 'kubernetes.io/service-name': name } },
    ports: [{ name: 'http', protocol, port }],
    endpoints: endpoints.map((e) => ({
      addresses: [e.ip],
      conditions: { ready: e.ready ?? true, ...(e.serving !== undefined && { serving: e.serving }), ...(e.terminating !== undefined && { terminating: e.terminating }) },
      nodeName: e.node ?? NODE,
    })),
  };
}
function model(services: V1Service[], slices: V1EndpointSlice[], overrides: Partial<ModelInputs> = {}, bindAll = false) {
  return buildProxyModel(
    {
      services,
      slicesFor: (namespace, name) => slices.filter((s) => s.metadata?.namespace === namespace && s.metadata.labels?.['kubernetes.io/service-name'] === name),
      node,
      nodeName: NODE,
      localAddresses: ['192.168.1.10', '10.0.2.15'],
      ...overrides,
    },
    { families: ['ipv4', 'ipv6'], nodePortBindOnAllIp: bindAll, serviceProxyName: 'kube-router' },
  );
}
const ids = (m: ReturnType<typeof model>) => [...m.virtualServers.keys()].sort();

describe('buildProxyModel', () => {
  it('maps a ClusterIP to one virtual service with the ready endpoints as masqueraded real servers, weight 1, rr', () => {
    const m = model([svc('web', {})], [slice('web', 'IPv4', [{ ip: '10.244.0.2' }, { ip: '10.244.0.3', ready: false }])]);
    expect([...m.virtualServers.values()]).toEqual([
      {
        id: 'tcp/10.96.0.1/80',
        owner: 'ns/web',
        portName: 'http',
        kind: 'cluster-ip',
        service: { protocol: 'tcp', address: '10.96.0.1', port: 80, scheduler: 'rr', flags: [] },
        destinations: [{ address: '10.244.0.2', port: 8080, forwarding: 'masquerade', weight: 1 }],
        preserveClientAddress: false,
        hairpin: false,
      },
    ]);
    expect([...m.vips.ipv4]).toEqual(['10.96.0.1']);
  });

  it('programs NodePorts on the node addresses, externalIPs and LoadBalancer ingress (not ipMode Proxy), each family', () => {
    const m = model(
      [
        svc(
          'lb',
          { type: 'LoadBalancer', clusterIPs: ['10.96.0.1', 'fd00:96::1'], externalIPs: ['203.0.113.5'], ports: [{ name: 'http', protocol: 'UDP', port: 53, nodePort: 30053 }] },
          {},
          { loadBalancer: { ingress: [{ ip: '198.51.100.1' }, { ip: '198.51.100.2', ipMode: 'Proxy' }] } },
        ),
      ],
      [
        { ...slice('lb', 'IPv4', [{ ip: '10.244.0.2' }]), ports: [{ name: 'http', protocol: 'UDP', port: 5353 }] },
        { ...slice('lb', 'IPv6', [{ ip: 'fd00:244::2' }]), ports: [{ name: 'http', protocol: 'UDP', port: 5353 }] },
      ],
    );
    expect(ids(m)).toEqual(['udp/10.96.0.1/53', 'udp/192.168.1.10/30053', 'udp/198.51.100.1/53', 'udp/203.0.113.5/53', 'udp/fd00:1::10/30053', 'udp/fd00:96::1/53']);
    expect(m.virtualServers.get('udp/fd00:96::1/53')?.destinations).toEqual([{ address: 'fd00:244::2', port: 5353, forwarding: 'masquerade', weight: 1 }]);
    // NodePorts live on node addresses; only cluster, external and LB IPs go on kube-dummy-if.
    expect([...m.vips.ipv4].sort()).toEqual(['10.96.0.1', '198.51.100.1', '203.0.113.5']);
  });

  it('--strict-external-ip-validation: programs only externalIPs and LoadBalancer IPs within their ranges, a Warning for the rest', () => {
    const lb = svc(
      'lb',
      { type: 'LoadBalancer', externalIPs: ['203.0.113.5', '192.0.2.9', '10.96.0.9'], ports: [{ name: 'http', protocol: 'TCP', port: 80 }] },
      {},
      { loadBalancer: { ingress: [{ ip: '198.51.100.1' }, { ip: '203.0.113.77' }] } },
    );
    const inputs = { services: [lb], slicesFor: () => [], node, nodeName: NODE, localAddresses: [] };
    const options = { families: ['ipv4', 'ipv6'] as const, nodePortBindOnAllIp: false, serviceProxyName: 'kube-router' };
    const strict = buildProxyModel(inputs, {
      ...options,
      validation: { externalIpRanges: ['203.0.113.0/24', '10.96.0.0/24'], loadBalancerIpRanges: ['198.51.100.0/24'], clusterIpRanges: ['10.96.0.0/12'] },
    });
    expect(ids(strict)).toEqual(['tcp/10.96.0.1/80', 'tcp/198.51.100.1/80', 'tcp/203.0.113.5/80']);
    expect([...strict.vips.ipv4].sort()).toEqual(['10.96.0.1', '198.51.100.1', '203.0.113.5']);
    expect(strict.refused.map((refusal) => refusal.message)).toEqual([
      'externalip 192.0.2.9 is not programmed: it is not within --service-external-ip-range',
      'externalip 10.96.0.9 is not programmed: it lies in --service-cluster-ip-range',
      'loadbalancerip 203.0.113.77 is not programmed: it is not within --loadbalancer-ip-range',
    ]);
    expect(strict.refused.every((refusal) => refusal.owner === 'ns/lb' && refusal.reason === 'InvalidServiceAddress')).toBe(true);
    // Refusals are not the Service's errors: the sync does not fail for them.
    expect(strict.problems).toEqual([]);
    // No range of a kind: none of that kind (default deny); the cluster IP stays.
    const noRanges = buildProxyModel(inputs, { ...options, validation: { externalIpRanges: [], loadBalancerIpRanges: [], clusterIpRanges: [] } });
    expect(ids(noRanges)).toEqual(['tcp/10.96.0.1/80']);
    expect(noRanges.refused).toHaveLength(5);
    // Without validation every address is programmed, as before kube-router 2.8.
    expect(ids(buildProxyModel(inputs, options))).toHaveLength(6);
    // An address of a family the node does not run is not refused, only left out.
    const v6 = svc('v6', { clusterIP: '10.96.0.2', externalIPs: ['2001:db8::5'] });
    const v4Only = buildProxyModel(
      { ...inputs, services: [v6] },
      { ...options, families: ['ipv4'], validation: { externalIpRanges: [], loadBalancerIpRanges: [], clusterIpRanges: [] } },
    );
    expect(v4Only.refused).toEqual([]);
    expect(ids(v4Only)).toEqual(['tcp/10.96.0.2/80']);
  });

  it('makes an externalIP or LoadBalancer IP that is not an address a problem of its Service, programming the rest', () => {
    const m = model(
      [
        svc('bad', { type: 'LoadBalancer', externalIPs: ['203.0.113.5', 'not-an-ip'] }, {}, { loadBalancer: { ingress: [{ ip: '198.51.100.300' }, { ip: '198.51.100.1' }] } }),
        svc('good', { clusterIP: '10.96.0.2' }),
      ],
      [],
    );
    expect(ids(m)).toEqual(['tcp/10.96.0.1/80', 'tcp/10.96.0.2/80', 'tcp/198.51.100.1/80', 'tcp/203.0.113.5/80']);
    expect(m.problems.map((problem) => [problem.owner, problem.reason, problem.message])).toEqual([
      ['ns/bad', 'InvalidServiceAddress', 'externalip "not-an-ip" is not an IP address'],
      ['ns/bad', 'InvalidServiceAddress', 'loadbalancerip "198.51.100.300" is not an IP address'],
    ]);
  });

  it('reads every Service address strictly: octal, zoned and short spellings are problems of their Service, ::1.2.3.4 stays IPv6', () => {
    const m = model(
      [
        svc('octal', { clusterIP: '010.96.0.9' }),
        svc('zoned', { clusterIP: '10.96.0.3', clusterIPs: ['10.96.0.3', 'fe80::1%eth0'], externalIPs: ['203.0.113.1%eth0'] }),
        svc('lb', { type: 'LoadBalancer', clusterIP: '10.96.0.4' }, {}, { loadBalancer: { ingress: [{ ip: '198.51.100.1' }, { ip: '198.51.1' }] } }),
        svc('mapped', { clusterIP: '10.96.0.5', externalIPs: ['::1.2.3.4', '::ffff:203.0.113.9'] }),
        svc('good', { clusterIP: '10.96.0.2' }),
      ],
      [],
    );
    expect(ids(m)).toEqual(['tcp/10.96.0.2/80', 'tcp/10.96.0.3/80', 'tcp/10.96.0.4/80', 'tcp/10.96.0.5/80', 'tcp/198.51.100.1/80', 'tcp/203.0.113.9/80', 'tcp/::102:304/80']);
    expect(m.problems.map((problem) => [problem.owner, problem.reason, problem.message])).toEqual([
      ['ns/octal', 'InvalidServiceAddress', 'clusterip "010.96.0.9" is not an IP address'],
      ['ns/zoned', 'InvalidServiceAddress', 'clusterip "fe80::1%eth0" is not an IP address'],
      ['ns/zoned', 'InvalidServiceAddress', 'externalip "203.0.113.1%eth0" is not an IP address'],
      ['ns/lb', 'InvalidServiceAddress', 'loadbalancerip "198.51.1" is not an IP address'],
    ]);
  });

  it('makes an endpoint address or port that is not one a problem of its Service and programs its good endpoints', () => {
    const web = slice('web', 'IPv4', [{ ip: '010.244.0.2' }, { ip: '10.244.0.3' }, { ip: 'fe80::2%eth0' }]);
    const broken = { ...slice('broken', 'IPv4', [{ ip: '10.244.0.4' }], 70_000), metadata: { namespace: 'ns', name: 'broken-IPv4', labels: { 'kubernetes.io/service-name': 'web' } } };
    const m = model([svc('web', {})], [web, broken]);
    expect(m.virtualServers.get('tcp/10.96.0.1/80')?.destinations).toEqual([{ address: '10.244.0.3', port: 8080, forwarding: 'masquerade', weight: 1 }]);
    expect(m.problems.map((problem) => [problem.owner, problem.reason, problem.message])).toEqual([
      ['ns/web', 'InvalidEndpointSlice', 'EndpointSlice web-IPv4: endpoint address "010.244.0.2" is not an IP address; it is not used'],
      ['ns/web', 'InvalidEndpointSlice', 'EndpointSlice web-IPv4: endpoint address "fe80::2%eth0" is not an IP address; it is not used'],
      ['ns/web', 'InvalidEndpointSlice', 'EndpointSlice broken-IPv4: port "http" 70000 is outside 1-65535; its endpoints are not used'],
    ]);
  });

  it('reports a Node address that is not one and puts no NodePort on it', () => {
    const oddNode: V1Node = { metadata: { name: NODE }, status: { addresses: [{ type: 'InternalIP', address: '192.168.001.10' }, { type: 'ExternalIP', address: '203.0.113.50' }, { type: 'Hostname', address: 'n1' }] } };
    const m = model([svc('np', { type: 'NodePort', ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }] })], [], { node: oddNode });
    expect(ids(m)).toEqual(['tcp/10.96.0.1/80', 'tcp/203.0.113.50/30080']);
    expect(m.nodeProblems).toEqual(['node n1: InternalIP "192.168.001.10" is not an IP address; no NodePort listens on it']);
    expect(m.problems).toEqual([]);
  });

  it('makes a port, nodePort, targetPort or healthCheckNodePort outside 1-65535 a problem of its Service port; its other ports stand', () => {
    // The good port of each: port 80 only, so that no two Services claim one NodePort.
    const ports = (port: Partial<V1ServicePort>): V1ServicePort[] => [
      { name: 'bad', protocol: 'TCP', port: 81, ...port },
      { name: 'http', protocol: 'TCP', port: 80 },
    ];
    const m = model(
      [
        svc('zero', { clusterIP: '10.96.0.2', type: 'NodePort', ports: ports({ port: 0 }) }),
        svc('high', { clusterIP: '10.96.0.3', type: 'NodePort', ports: ports({ port: 70_000 }) }),
        svc('node-port', { clusterIP: '10.96.0.4', type: 'NodePort', ports: ports({ nodePort: 70_000 }) }),
        svc('target', { clusterIP: '10.96.0.5', type: 'NodePort', ports: ports({ targetPort: 70_000 }) }),
        svc('fraction', { clusterIP: '10.96.0.6', type: 'NodePort', ports: ports({ port: 80.5 }) }),
        svc('health', { clusterIP: '10.96.0.7', type: 'LoadBalancer', externalTrafficPolicy: 'Local', healthCheckNodePort: 70_000, ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30081 }] }),
        // A nodePort of 0 is none (allocateLoadBalancerNodePorts: false), a named targetPort is the slices' business.
        svc('no-node-port', { clusterIP: '10.96.0.8', type: 'LoadBalancer', ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 0, targetPort: 'web' }] }),
      ],
      [],
    );
    expect(ids(m)).toEqual([
      'tcp/10.96.0.2/80',
      'tcp/10.96.0.3/80',
      'tcp/10.96.0.4/80',
      'tcp/10.96.0.5/80',
      'tcp/10.96.0.6/80',
      'tcp/10.96.0.7/80',
      'tcp/10.96.0.8/80',
      'tcp/192.168.1.10/30081',
      'tcp/fd00:1::10/30081',
    ]);
    expect(m.problems.map((problem) => [problem.owner, problem.reason, problem.message])).toEqual([
      ['ns/zero', 'InvalidServicePort', 'port "bad": port 0 is outside 1-65535; the port is not programmed'],
      ['ns/high', 'InvalidServicePort', 'port "bad": port 70000 is outside 1-65535; the port is not programmed'],
      ['ns/node-port', 'InvalidServicePort', 'port "bad": nodePort 70000 is outside 1-65535; the port is not programmed'],
      ['ns/target', 'InvalidServicePort', 'port "bad": targetPort 70000 is outside 1-65535; the port is not programmed'],
      ['ns/fraction', 'InvalidServicePort', 'port "bad": port 80.5 is outside 1-65535; the port is not programmed'],
      ['ns/health', 'InvalidServicePort', 'healthCheckNodePort 70000 is outside 1-65535; no health check server is started'],
    ]);
    expect(m.healthChecks).toEqual([]);
  });

  it('knows only TCP, UDP and SCTP: a protocol named like a prototype member is unsupported, not a function', () => {
    const names = ['toString', '__proto__', 'constructor', 'hasOwnProperty', 'tcp'];
    const m = model([...names.map((protocol, i) => svc(`p${i}`, { clusterIP: `10.96.0.${i + 2}`, ports: [{ name: 'http', protocol, port: 80 }] })), svc('good', { clusterIP: '10.96.1.1' })], []);
    expect(ids(m)).toEqual(['tcp/10.96.1.1/80']);
    expect(m.problems.map((problem) => problem.reason)).toEqual(names.map(() => 'UnsupportedProtocol'));
    expect(m.problems[0]?.message).toBe('port "http": protocol "toString" is not supported by IPVS');
  });

  it('binds NodePorts to every local address with --nodeport-bindon-all-ip', () => {
    const m = model([svc('np', { type: 'NodePort', ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }] })], [], {}, true);
    expect(ids(m)).toEqual(['tcp/10.0.2.15/30080', 'tcp/10.96.0.1/80', 'tcp/192.168.1.10/30080']);
  });

  it('keeps only local endpoints for externalTrafficPolicy Local (and kube-router.io/service.local), the ClusterIP keeps all', () => {
    const services = [
      svc('local', { type: 'LoadBalancer', externalTrafficPolicy: 'Local', healthCheckNodePort: 32000, ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }] }),
      svc('annotated', { clusterIP: '10.96.0.2', externalIPs: ['203.0.113.9'] }, { annotations: { 'kube-router.io/service.local': 'true' } }),
    ];
    const endpoints = [{ ip: '10.244.0.2' }, { ip: '10.244.1.2', node: 'n2' }];
    const m = model(services, [slice('local', 'IPv4', endpoints), slice('annotated', 'IPv4', endpoints)]);
    expect(m.virtualServers.get('tcp/192.168.1.10/30080')?.destinations.map((d) => d.address)).toEqual(['10.244.0.2']);
    expect(m.virtualServers.get('tcp/192.168.1.10/30080')?.preserveClientAddress).toBe(true);
    expect(m.virtualServers.get('tcp/10.96.0.1/80')?.destinations).toHaveLength(2);
    expect(m.virtualServers.get('tcp/203.0.113.9/80')?.destinations.map((d) => d.address)).toEqual(['10.244.0.2']);
    expect(m.healthChecks).toEqual([{ owner: 'ns/local', port: 32000, localEndpoints: 1 }]);
  });

  it('honours internalTrafficPolicy Local on the ClusterIP', () => {
    const m = model([svc('itp', { internalTrafficPolicy: 'Local' })], [slice('itp', 'IPv4', [{ ip: '10.244.0.2' }, { ip: '10.244.1.2', node: 'n2' }])]);
    expect(m.virtualServers.get('tcp/10.96.0.1/80')?.destinations.map((d) => d.address)).toEqual(['10.244.0.2']);
  });

  it('turns ClientIP affinity into persistence and reads the scheduler annotations', () => {
    const m = model(
      [
        svc('sticky', { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 60 } } }),
        svc('maglev', { clusterIP: '10.96.0.2' }, { annotations: { 'kube-router.io/service.scheduler': 'mh', 'kube-router.io/service.schedflags': 'flag-1,mh-port' } }),
      ],
      [],
    );
    expect(m.virtualServers.get('tcp/10.96.0.1/80')?.service).toMatchObject({ scheduler: 'rr', persistentSeconds: 60 });
    expect(m.virtualServers.get('tcp/10.96.0.2/80')?.service).toMatchObject({ scheduler: 'mh', flags: ['mh-fallback', 'mh-port'] });
  });

  it('reports bad annotations as problems of their Service and programs the others', () => {
    const m = model(
      [svc('bad', {}, { annotations: { 'kube-router.io/service.scheduler': 'Round Robin' } }), svc('flags', { clusterIP: '10.96.0.3' }, { annotations: { 'kube-router.io/service.scheduler': 'sh', 'kube-router.io/service.schedflags': 'mh-port' } }), svc('good', { clusterIP: '10.96.0.2' })],
      [],
    );
    expect(ids(m)).toEqual(['tcp/10.96.0.2/80']);
    expect(m.problems.map((p) => [p.owner, p.reason])).toEqual([
      ['ns/bad', 'InvalidServiceAnnotation'],
      ['ns/flags', 'InvalidServiceAnnotation'],
    ]);
  });

  it('marks hairpin on the ClusterIP with kube-router.io/service.hairpin, on external IPs only with .hairpin.externalips', () => {
    const m = model(
      [
        svc('hp', { externalIPs: ['203.0.113.1'] }, { annotations: { 'kube-router.io/service.hairpin': '' } }),
        svc('hpx', { clusterIP: '10.96.0.2', externalIPs: ['203.0.113.2'] }, { annotations: { 'kube-router.io/service.hairpin': '', 'kube-router.io/service.hairpin.externalips': '' } }),
        svc('plain', { clusterIP: '10.96.0.3' }),
      ],
      [],
    );
    const hairpin = [...m.virtualServers.values()].filter((server) => server.hairpin).map((server) => server.id).sort();
    expect(hairpin).toEqual(['tcp/10.96.0.1/80', 'tcp/10.96.0.2/80', 'tcp/203.0.113.2/80']);
  });

  it('lists the local ready endpoints of hairpin Services (annotated, or all with hairpinMode) of a family they have a cluster IP of', () => {
    const services = [
      svc('hp', { clusterIPs: ['10.96.0.1'] }, { annotations: { 'kube-router.io/service.hairpin': '' } }),
      svc('hp2', { clusterIP: '10.96.0.2' }, { annotations: { 'kube-router.io/service.hairpin': '' } }),
      svc('plain', { clusterIP: '10.96.0.3' }),
    ];
    const slices = [
      slice('hp', 'IPv4', [{ ip: '10.244.0.2' }, { ip: '10.244.1.2', node: 'n2' }, { ip: '10.244.0.9', ready: false }]),
      slice('hp', 'IPv6', [{ ip: 'fd00:244::2' }]),
      slice('hp2', 'IPv4', [{ ip: '10.244.0.2' }]),
      slice('plain', 'IPv4', [{ ip: '10.244.0.3' }]),
    ];
    const annotated = model(services, slices);
    // No IPv6 cluster IP on ns/hp: its IPv6 endpoint is not hairpinned (kube-router skips it too).
    expect([...annotated.hairpinEndpoints]).toEqual([['10.244.0.2', ['ns/hp', 'ns/hp2']]]);
    const everyService = buildProxyModel(
      { services, slicesFor: (namespace, name) => slices.filter((s) => s.metadata?.labels?.['kubernetes.io/service-name'] === name), node, nodeName: NODE, localAddresses: [] },
      { families: ['ipv4', 'ipv6'], nodePortBindOnAllIp: false, serviceProxyName: 'kube-router', hairpinMode: true },
    );
    expect(new Map(everyService.hairpinEndpoints)).toEqual(new Map([['10.244.0.2', ['ns/hp', 'ns/hp2']], ['10.244.0.3', ['ns/plain']]]));
  });

  it('skips LoadBalancer IPs with kube-router.io/service.skiplbips and leaves a claimed address to its first Service', () => {
    const m = model(
      [
        svc('skip', { type: 'LoadBalancer' }, { annotations: { 'kube-router.io/service.skiplbips': 'true' } }, { loadBalancer: { ingress: [{ ip: '198.51.100.1' }] } }),
        svc('dup', {}),
      ],
      [],
    );
    expect(ids(m)).toEqual(['tcp/10.96.0.1/80']);
    expect(m.problems).toEqual([expect.objectContaining({ owner: 'ns/dup', reason: 'DuplicateServiceAddress' })]);
  });
  describe('Kubernetes semantics beyond kube-router', () => {
    const terminating = (ip: string, node = NODE) => ({ ip, node, ready: false, serving: true, terminating: true });
    const dests = (m: ReturnType<typeof model>, id: string) => m.virtualServers.get(id)?.destinations.map((d) => d.address);

    it('uses serving terminating endpoints only when no ready one exists (KEP-1669)', () => {
      const withReady = model([svc('web', {})], [slice('web', 'IPv4', [{ ip: '10.244.0.2' }, terminating('10.244.0.3')])]);
      expect(dests(withReady, 'tcp/10.96.0.1/80')).toEqual(['10.244.0.2']);
      const onlyTerminating = model([svc('web', {})], [slice('web', 'IPv4', [terminating('10.244.0.3'), { ip: '10.244.0.4', ready: false, serving: false, terminating: true }])]);
      expect(dests(onlyTerminating, 'tcp/10.96.0.1/80')).toEqual(['10.244.0.3']);
      expect(onlyTerminating.virtualServers.get('tcp/10.96.0.1/80')?.noEndpoints).toBeUndefined();
    });

    it('falls back per traffic policy: Local takes this node’s terminating ones when it has no ready one, Cluster keeps the ready ones elsewhere', () => {
      const m = model(
        [svc('lb', { type: 'NodePort', externalTrafficPolicy: 'Local', ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }] })],
        [slice('lb', 'IPv4', [{ ip: '10.244.1.2', node: 'n2' }, terminating('10.244.0.3')])],
      );
      expect(dests(m, 'tcp/10.96.0.1/80')).toEqual(['10.244.1.2']);
      expect(dests(m, 'tcp/192.168.1.10/30080')).toEqual(['10.244.0.3']);
    });

    it('rejects where a Service port has no usable endpoint, drops where only the Local policy finds none', () => {
      const m = model(
        [
          svc('empty', { clusterIP: '10.96.0.2' }),
          svc('local', { clusterIP: '10.96.0.3', type: 'NodePort', externalTrafficPolicy: 'Local', ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30081 }] }),
        ],
        [slice('empty', 'IPv4', [{ ip: '10.244.0.9', ready: false, serving: false }]), slice('local', 'IPv4', [{ ip: '10.244.1.2', node: 'n2' }])],
      );
      expect(m.virtualServers.get('tcp/10.96.0.2/80')).toMatchObject({ destinations: [], noEndpoints: 'reject' });
      expect(m.virtualServers.get('tcp/10.96.0.3/80')?.noEndpoints).toBeUndefined();
      expect(m.virtualServers.get('tcp/192.168.1.10/30081')).toMatchObject({ destinations: [], noEndpoints: 'drop' });
    });

    it('counts only ready local endpoints for the health check, so a node whose pods terminate fails it', () => {
      const lb = svc('lb', { type: 'LoadBalancer', externalTrafficPolicy: 'Local', healthCheckNodePort: 32000, ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }] });
      expect(model([lb], [slice('lb', 'IPv4', [terminating('10.244.0.3'), { ip: '10.244.0.4' }])]).healthChecks).toEqual([{ owner: 'ns/lb', port: 32000, localEndpoints: 1 }]);
      expect(model([lb], [slice('lb', 'IPv4', [terminating('10.244.0.3')])]).healthChecks).toEqual([{ owner: 'ns/lb', port: 32000, localEndpoints: 0 }]);
    });

    it('narrows the cluster endpoints by topology hints for this node’s zone', () => {
      const zoned: V1Node = { ...node, metadata: { name: NODE, labels: { 'topology.kubernetes.io/zone': 'z1' } } };
      const hinted = slice('web', 'IPv4', [{ ip: '10.244.0.2' }, { ip: '10.244.1.2', node: 'n2' }]);
      hinted.endpoints[0]!.hints = { forZones: [{ name: 'z1' }] };
      hinted.endpoints[1]!.hints = { forZones: [{ name: 'z2' }] };
      expect(dests(model([svc('web', {})], [hinted], { node: zoned }), 'tcp/10.96.0.1/80')).toEqual(['10.244.0.2']);
    });

    it('reads loadBalancerSourceRanges per family onto the LoadBalancer IPs only: canonical, fail closed, /0 opens', () => {
      const status = { loadBalancer: { ingress: [{ ip: '198.51.100.1' }, { ip: '2001:db8::1' }] } };
      const lb = (ranges: string[]) =>
        model([svc('lb', { type: 'LoadBalancer', clusterIPs: ['10.96.0.1'], loadBalancerSourceRanges: ranges, ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }] }, {}, status)], [slice('lb', 'IPv4', [{ ip: '10.244.0.2' }])]);
      const m = lb(['192.0.2.7/24', ' 203.0.113.0/25 ', '192.0.2.0/24', 'not-a-cidr']);
      expect(m.virtualServers.get('tcp/198.51.100.1/80')?.sourceRanges).toEqual(['192.0.2.0/24', '203.0.113.0/25']);
      // Ranges given, none of IPv6: the IPv6 LoadBalancer IP admits nobody rather than everybody.
      expect(m.virtualServers.get('tcp/2001:db8::1/80')?.sourceRanges).toEqual([]);
      expect(m.virtualServers.get('tcp/10.96.0.1/80')?.sourceRanges).toBeUndefined();
      expect(m.virtualServers.get('tcp/192.168.1.10/30080')?.sourceRanges).toBeUndefined();
      expect(m.problems).toEqual([{ owner: 'ns/lb', reason: 'InvalidServiceSourceRange', message: 'loadBalancerSourceRanges "not-a-cidr" is not a CIDR; it admits nobody' }]);
      expect(lb(['0.0.0.0/0', '10.0.0.0/8']).virtualServers.get('tcp/198.51.100.1/80')?.sourceRanges).toBeUndefined();
      expect(lb([]).virtualServers.get('tcp/198.51.100.1/80')?.sourceRanges).toBeUndefined();
    });
  });
});

describe('buildProxyModel with a cache', () => {
  const options = { families: ['ipv4', 'ipv6'] as const, nodePortBindOnAllIp: false, serviceProxyName: 'kube-router' };
  const build = (services: V1Service[], slices: V1EndpointSlice[], cache: ProxyModelCache, nodeObject: V1Node = node) =>
    buildProxyModel(
      {
        services,
        slicesFor: (namespace, name) => slices.filter((s) => s.metadata?.namespace === namespace && s.metadata.labels?.['kubernetes.io/service-name'] === name),
        node: nodeObject,
        nodeName: NODE,
        localAddresses: [],
      },
      { ...options, families: [...options.families] },
      cache,
    );

  it('computes again only the Services whose object, slices or node changed, and gives the same model as without it', () => {
    const cache: ProxyModelCache = new WeakMap();
    const web = svc('web', { clusterIP: '10.96.0.2', type: 'NodePort', ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }] });
    const api = svc('api', { clusterIP: '10.96.0.3' });
    const webSlice = slice('web', 'IPv4', [{ ip: '10.244.0.2' }]);
    const apiSlice = slice('api', 'IPv4', [{ ip: '10.244.0.3' }]);
    const first = build([web, api], [webSlice, apiSlice], cache);
    const vs = (m: ProxyModel, id: string) => m.virtualServers.get(id);

    // Nothing changed: the same objects, from the cache.
    const again = build([web, api], [webSlice, apiSlice], cache);
    expect(vs(again, 'tcp/10.96.0.2/80')).toBe(vs(first, 'tcp/10.96.0.2/80'));
    expect(vs(again, 'tcp/10.96.0.3/80')).toBe(vs(first, 'tcp/10.96.0.3/80'));

    // api's slice replaced (an informer update is a new object): api is computed again, web is not.
    const apiMoved = slice('api', 'IPv4', [{ ip: '10.244.0.9' }]);
    const moved = build([web, api], [webSlice, apiMoved], cache);
    expect(vs(moved, 'tcp/10.96.0.2/80')).toBe(vs(first, 'tcp/10.96.0.2/80'));
    expect(vs(moved, 'tcp/10.96.0.3/80')?.destinations.map((d) => d.address)).toEqual(['10.244.0.9']);
    expect(moved).toEqual(build([web, api], [webSlice, apiMoved], new WeakMap()));

    // The node's addresses changed: every Service again (web's NodePort moves with them).
    const renumbered: V1Node = { ...node, status: { addresses: [{ type: 'InternalIP', address: '192.168.1.20' }] } };
    const onNewNode = build([web, api], [webSlice, apiMoved], cache, renumbered);
    expect(ids(onNewNode)).toContain('tcp/192.168.1.20/30080');
    expect(ids(onNewNode)).not.toContain('tcp/192.168.1.10/30080');
    expect(vs(onNewNode, 'tcp/10.96.0.3/80')).not.toBe(vs(moved, 'tcp/10.96.0.3/80'));
  });

  it('settles two Services claiming one address when they are put together, cached or not: the first keeps it', () => {
    const cache: ProxyModelCache = new WeakMap();
    const first = svc('first', { clusterIP: '10.96.0.7' });
    const second = svc('second', { clusterIP: '10.96.0.7' });
    for (let round = 0; round < 2; round++) {
      const built = build([first, second], [], cache);
      expect(built.virtualServers.get('tcp/10.96.0.7/80')?.owner).toBe('ns/first');
      expect(built.problems).toEqual([{ owner: 'ns/second', reason: 'DuplicateServiceAddress', message: 'tcp/10.96.0.7/80 is also claimed by Service ns/first; it stays with ns/first' }]);
    }
  });
});
