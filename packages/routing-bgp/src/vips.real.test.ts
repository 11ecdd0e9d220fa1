/**
 * Service VIP advertisement and kube-router's import/export policies, seen from a real external peer: a gobgpd router
 * in its own namespace on the mesh's underlay, in another AS, peered through the plugin's `peerRouters` option as
 * --peer-router-ips would. Namespaces: the mesh's `tbgp<run>`, the router's and the Kubernetes namespace `bv<run>`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { freePort, labSkipReason, startApiServer, type ApiServer, waitFor } from '@kube-router/testkit';
import { anyType, GobgpClient, type ApiPath } from './gobgp-api.js';
import { pathNextHop, pathPrefix } from './paths.js';
import { startExternalRouter, type ExternalRouter } from './testing/external-router.js';
import { createMesh, injectedRoutes, nodeObject, routingAgent, sh, type Mesh, type RoutingAgent } from './testing/mesh.js';

const skipReason = labSkipReason('gobgpd', 'iptables', 'ipset');

const CLUSTER_ASN = 64512;
const ROUTER_ASN = 65100;

describe.skipIf(skipReason)(`Service VIPs and BGP policies with a real external peer${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  let mesh: Mesh | undefined;
  let server: ApiServer | undefined;
  let router: ExternalRouter | undefined;
  let agent: RoutingAgent | undefined;
  const namespace = `bv${Math.random().toString(36).slice(2, 6)}`;

  afterEach(async () => {
    await agent?.stop().catch(() => undefined);
    agent = undefined;
    await router?.teardown();
    router = undefined;
    await server?.close();
    server = undefined;
    await mesh?.teardown();
    mesh = undefined;
  });

  type AgentOptions = Parameters<typeof routingAgent>[3];
  /** One node, peered with an external router that announces `announce`; the node's annotations as given. */
  async function setUp(options: AgentOptions, annotations: Record<string, string> = {}, announce: string[] = [], dualStack = false) {
    mesh = await createMesh(1, { dualStack });
    const node = mesh.nodes[0]!;
    server = await startApiServer({ port: 0 });
    server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
    server.create(nodeObject(node, annotations));
    const bgpPort = await freePort();
    router = await startExternalRouter(mesh, `bv${Math.random().toString(36).slice(2, 6)}`, {
      index: 1,
      asn: ROUTER_ASN,
      listenPort: bgpPort,
      announce,
      neighbors: [{ neighborAddress: node.address, peerAsn: CLUSTER_ASN, remotePort: bgpPort, holdTimeSeconds: 9, families: dualStack ? ['AFI_IP', 'AFI_IP6'] : ['AFI_IP'] }],
    });
    agent = routingAgent(mesh, node, await server.writeKubeconfig(), {
      bgpPort,
      peerRouters: [{ address: router.address, asn: ROUTER_ASN, port: bgpPort }],
      ...options,
    });
    await agent.start();
    await waitFor('session with the external router', async () => (await router!.sessionState(node.address)) === 'ESTABLISHED');
    return { node, router, agent, server };
  }

  const learned = async () => new Set(await router!.learnedFrom(mesh!.nodes[0]!.address));
  const hasLearned = (prefix: string) => async () => (await learned()).has(prefix);
  const notLearned = (prefix: string) => async () => !(await learned()).has(prefix);

  function service(name: string, spec: Record<string, unknown>, annotations: Record<string, string> = {}) {
    return {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { namespace, name, annotations },
      spec: { ports: [{ port: 80, protocol: 'TCP', targetPort: 8080 }], ...spec },
    };
  }

  function endpointSlice(serviceName: string, nodeName: string) {
    return {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { namespace, name: `${serviceName}-abc`, labels: { 'kubernetes.io/service-name': serviceName } },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['10.78.1.2'], nodeName, conditions: { ready: true } }],
      ports: [{ port: 8080, protocol: 'TCP' }],
    };
  }

  const syncFailures = async () =>
    (await agent!.metrics.registry.getSingleMetric('kube_router_controller_sync_failures_total')!.get()).values.find(
      (v) => v.labels.controller === 'routing-bgp',
    )?.value ?? 0;
  const warnings = (reason: string, kind: string) =>
    (server!.list('v1', 'Event') as { reason?: string; message?: string; involvedObject?: { kind?: string } }[]).filter(
      (e) => e.reason === reason && e.involvedObject?.kind === kind,
    );

  it('a LoadBalancer address set in the status reaches the peer within seconds and goes when the Service is deleted', async () => {
    const { server } = await setUp({ advertiseLoadBalancerIp: true });
    server.create(service('web', { type: 'LoadBalancer', clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10'] }));
    const lb = server.get('v1', 'Service', namespace, 'web')!;
    const allocated = Date.now();
    server.updateStatus({ ...lb, status: { loadBalancer: { ingress: [{ ip: '198.51.100.5' }] } } });
    const learnedMs = await waitFor('the peer learns the LoadBalancer IP', hasLearned('198.51.100.5/32'), 10_000);
    console.log(`LoadBalancer IP learned by the peer ${Date.now() - allocated} ms after allocation`);
    expect(learnedMs).toBeLessThan(5_000);
    // --advertise-cluster-ip is off: the cluster IP stays inside.
    expect((await learned()).has('10.96.0.10/32')).toBe(false);
    const path = (await router!.paths()).find((p) => pathPrefix(p) === '198.51.100.5/32')!;
    expect(asPath(path)).toEqual([CLUSTER_ASN]);

    const deleted = Date.now();
    server.delete('v1', 'Service', namespace, 'web');
    await waitFor('the peer loses the LoadBalancer IP', notLearned('198.51.100.5/32'), 10_000);
    console.log(`LoadBalancer IP withdrawn from the peer ${Date.now() - deleted} ms after the Service was deleted`);
  }, 60_000);

  it('a gobgpd killed under the agent gets its VIPs and its policy back', async () => {
    const { node, server } = await setUp({ advertiseLoadBalancerIp: true, advertisePodCidr: false });
    server.create(service('web', { type: 'LoadBalancer', clusterIP: '10.96.0.15', clusterIPs: ['10.96.0.15'] }));
    server.updateStatus({ ...server.get('v1', 'Service', namespace, 'web')!, status: { loadBalancer: { ingress: [{ ip: '198.51.100.15' }] } } });
    await waitFor('the VIP at the peer', hasLearned('198.51.100.15/32'));
    const [pid] = (await sh('ip', ['netns', 'pids', node.netns])).split('\n').filter(Boolean);
    process.kill(Number(pid), 'SIGKILL');
    await waitFor('the peer loses the session', notLearned('198.51.100.15/32'), 30_000);
    await waitFor('the VIP back at the peer from the new gobgpd', hasLearned('198.51.100.15/32'), 30_000);
    // The new gobgpd got the export policy before its first session: the pod CIDR never went to the external peer.
    expect((await learned()).has(node.podCidr)).toBe(false);
  }, 90_000);

  it('1,000 LoadBalancer Services: every address reaches the peer', async () => {
    const { server } = await setUp({ advertiseLoadBalancerIp: true, advertisePodCidr: false });
    const count = 1_000;
    const started = Date.now();
    for (let i = 0; i < count; i++) {
      const name = `lb-${i}`;
      server.create(service(name, { type: 'LoadBalancer', clusterIP: `10.96.${i >> 8}.${i & 255}`, clusterIPs: [`10.96.${i >> 8}.${i & 255}`] }));
      server.updateStatus({
        ...server.get('v1', 'Service', namespace, name)!,
        status: { loadBalancer: { ingress: [{ ip: `198.18.${i >> 8}.${i & 255}` }] } },
      });
    }
    const created = Date.now();
    await waitFor(`${count} VIPs at the peer`, async () => (await learned()).size >= count, 60_000);
    console.log(`${count} LoadBalancer IPs at the peer ${Date.now() - created} ms after the last Service was written (${created - started} ms to write them)`);
    expect(await learned()).toEqual(new Set(Array.from({ length: count }, (_, i) => `198.18.${i >> 8}.${i & 255}/32`)));
  }, 120_000);

  it('dual-stack: an IPv6 LoadBalancer address goes as a /128 with the node\'s IPv6 next hop, beside the IPv4 one', async () => {
    // IPv6 is announced only with --enable-ipv6, as in kube-router.
    const { node, router, server } = await setUp({ advertiseLoadBalancerIp: true, enableIpv6: true }, {}, [], true);
    server.create(
      service('dual', { type: 'LoadBalancer', ipFamilyPolicy: 'PreferDualStack', ipFamilies: ['IPv4', 'IPv6'], clusterIP: '10.96.0.90', clusterIPs: ['10.96.0.90', 'fd00:96::90'] }),
    );
    server.updateStatus({
      ...server.get('v1', 'Service', namespace, 'dual')!,
      status: { loadBalancer: { ingress: [{ ip: '198.51.100.90' }, { ip: 'fd00:198:0:0::90' }] } },
    });
    await waitFor('the IPv4 address at the peer', hasLearned('198.51.100.90/32'));
    const v6 = async () => (await router.api.listGlobalPaths('AFI_IP6')).filter((p) => !p.isWithdraw && p.neighborIp === node.address);
    await waitFor('the IPv6 address at the peer', async () => (await v6()).some((p) => pathPrefix(p) === 'fd00:198::90/128'));
    const path = (await v6()).find((p) => pathPrefix(p) === 'fd00:198::90/128')!;
    expect(pathNextHop(path)).toBe(node.address6);
    server.delete('v1', 'Service', namespace, 'dual');
    await waitFor('both withdrawn', async () =>
      !(await learned()).has('198.51.100.90/32') && !(await v6()).some((p) => pathPrefix(p) === 'fd00:198::90/128'), 10_000);
  }, 60_000);

  it('announces cluster and external IPs per flag and per-Service annotation', async () => {
    const { server } = await setUp({ advertiseClusterIp: true, advertiseExternalIp: false });
    server.create(service('flags', { clusterIP: '10.96.0.20', clusterIPs: ['10.96.0.20'], externalIPs: ['192.0.2.20'] }));
    server.create(
      service('annotated', { clusterIP: '10.96.0.21', clusterIPs: ['10.96.0.21'], externalIPs: ['192.0.2.21'] }, {
        'kube-router.io/service.advertise.clusterip': 'false',
        'kube-router.io/service.advertise.externalip': 'true',
      }),
    );
    await waitFor('cluster IP by flag, external IP by annotation', async () => {
      const prefixes = await learned();
      return prefixes.has('10.96.0.20/32') && prefixes.has('192.0.2.21/32');
    });
    const prefixes = await learned();
    expect(prefixes.has('192.0.2.20/32')).toBe(false);
    expect(prefixes.has('10.96.0.21/32')).toBe(false);

    const flags = server.get('v1', 'Service', namespace, 'flags')!;
    server.update({ ...flags, metadata: { ...flags.metadata, annotations: { 'kube-router.io/service.advertise.clusterip': 'false' } } });
    await waitFor('the annotation withdraws the cluster IP', notLearned('10.96.0.20/32'), 10_000);
  }, 60_000);

  it('withdraws the addresses of a Local traffic policy Service while this node has no endpoint of it', async () => {
    const { server } = await setUp({ advertiseLoadBalancerIp: true, advertiseClusterIp: true });
    server.create(
      service('local', { type: 'LoadBalancer', clusterIP: '10.96.0.30', clusterIPs: ['10.96.0.30'], externalTrafficPolicy: 'Local', internalTrafficPolicy: 'Local' }),
    );
    const local = server.get('v1', 'Service', namespace, 'local')!;
    server.updateStatus({ ...local, status: { loadBalancer: { ingress: [{ ip: '198.51.100.30' }] } } });
    server.create(endpointSlice('local', 'node-1'));
    await waitFor('both addresses with a local endpoint', async () => {
      const prefixes = await learned();
      return prefixes.has('198.51.100.30/32') && prefixes.has('10.96.0.30/32');
    });
    const slice = server.get('discovery.k8s.io/v1', 'EndpointSlice', namespace, 'local-abc')!;
    server.update({ ...slice, endpoints: [{ addresses: ['10.78.2.2'], nodeName: 'node-2', conditions: { ready: true } }] });
    await waitFor('both withdrawn without a local endpoint', async () => {
      const prefixes = await learned();
      return !prefixes.has('198.51.100.30/32') && !prefixes.has('10.96.0.30/32');
    }, 10_000);
  }, 60_000);

  it('puts the node\'s communities and AS path prepend on what the external peer receives', async () => {
    const { node, server } = await setUp(
      { advertiseLoadBalancerIp: true, overrideNextHop: true },
      {
        'kube-router.io/node.bgp.communities': '65000:100,no-export,7',
        'kube-router.io/path-prepend.as': '65001',
        'kube-router.io/path-prepend.repeat-n': '2',
      },
    );
    server.create(service('web', { type: 'LoadBalancer', clusterIP: '10.96.0.40', clusterIPs: ['10.96.0.40'] }));
    server.updateStatus({ ...server.get('v1', 'Service', namespace, 'web')!, status: { loadBalancer: { ingress: [{ ip: '198.51.100.40' }] } } });
    await waitFor('VIP and pod CIDR at the peer', async () => (await learned()).has('198.51.100.40/32') && (await learned()).has(node.podCidr));
    for (const prefix of ['198.51.100.40/32', node.podCidr]) {
      const path = (await router!.paths()).find((p) => pathPrefix(p) === prefix)!;
      expect(communities(path)).toEqual(['65000:100', '65535:65281', '0:7']);
      // gobgpd applies the export policy after adding its own ASN, so the prepended one comes first, as in kube-router
      // (which documents prepending the node's own ASN, where the order does not show).
      expect(asPath(path)).toEqual([65001, 65001, CLUSTER_ASN]);
      expect(nextHop(path)).toBe(node.address);
    }
  }, 60_000);

  for (const overrideNextHop of [false, true]) {
    it(`--override-nexthop=${overrideNextHop}: a session from a second node address ${overrideNextHop ? 'carries that address' : 'keeps the node address'} as next hop`, async () => {
      // An iBGP external router (gobgpd leaves the next hop alone there) that the node reaches from 10.77.0.51.
      mesh = await createMesh(1);
      const node = mesh.nodes[0]!;
      await sh('ip', ['addr', 'add', '10.77.0.51/24', 'dev', 'eth0'], node.netns);
      server = await startApiServer({ port: 0 });
      server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
      const bgpPort = await freePort();
      router = await startExternalRouter(mesh, `bv${Math.random().toString(36).slice(2, 6)}`, {
        index: 1,
        asn: CLUSTER_ASN,
        listenPort: bgpPort,
        neighbors: [{ neighborAddress: '10.77.0.51', peerAsn: CLUSTER_ASN, remotePort: bgpPort, holdTimeSeconds: 9, families: ['AFI_IP'] }],
      });
      server.create(
        nodeObject(node, { 'kube-router.io/peers': `- remoteip: ${router.address}\n  remoteasn: ${CLUSTER_ASN}\n  localip: 10.77.0.51\n  port: ${bgpPort}\n` }),
      );
      agent = routingAgent(mesh, node, await server.writeKubeconfig(), { bgpPort, advertiseLoadBalancerIp: true, overrideNextHop });
      await agent.start();
      server.create(service('web', { type: 'LoadBalancer', clusterIP: '10.96.0.45', clusterIPs: ['10.96.0.45'] }));
      server.updateStatus({ ...server.get('v1', 'Service', namespace, 'web')!, status: { loadBalancer: { ingress: [{ ip: '198.51.100.45' }] } } });
      const vip = async () => (await router!.paths()).find((p) => pathPrefix(p) === '198.51.100.45/32' && p.neighborIp === '10.77.0.51');
      await waitFor('the VIP at the router', async () => (await vip()) !== undefined);
      expect(pathNextHop((await vip())!)).toBe(overrideNextHop ? '10.77.0.51' : node.address);
    }, 60_000);
  }

  it('--advertise-pod-cidr=false keeps the pod CIDR from the external peer and still sends it VIPs', async () => {
    const { node, server } = await setUp({ advertiseLoadBalancerIp: true, advertisePodCidr: false });
    server.create(service('web', { type: 'LoadBalancer', clusterIP: '10.96.0.50', clusterIPs: ['10.96.0.50'] }));
    server.updateStatus({ ...server.get('v1', 'Service', namespace, 'web')!, status: { loadBalancer: { ingress: [{ ip: '198.51.100.50' }] } } });
    await waitFor('VIP at the peer', hasLearned('198.51.100.50/32'));
    expect((await learned()).has(node.podCidr)).toBe(false);
    // The pod CIDR is still in the node's RIB: the mesh gets it (exported to iBGP peers only).
    const local = await new GobgpClient({ target: `unix://${agent!.apiSocket}` }).listGlobalPaths('AFI_IP');
    expect(local.some((p) => pathPrefix(p) === node.podCidr)).toBe(true);
  }, 60_000);

  it('rejects on import a peer\'s Service VIP, default route and customimportreject CIDRs, and keeps the rest', async () => {
    const { node, server } = await setUp(
      { advertiseLoadBalancerIp: true },
      { 'kube-router.io/node.bgp.customimportreject': '192.168.0.0/16' },
      ['198.51.100.60/32', '0.0.0.0/0', '192.168.10.0/24', '203.0.113.0/24'],
    );
    server.create(service('web', { type: 'LoadBalancer', clusterIP: '10.96.0.60', clusterIPs: ['10.96.0.60'] }));
    server.updateStatus({ ...server.get('v1', 'Service', namespace, 'web')!, status: { loadBalancer: { ingress: [{ ip: '198.51.100.60' }] } } });
    await waitFor('our VIP at the peer', hasLearned('198.51.100.60/32'));
    await waitFor('the accepted route in the kernel', async () => (await injectedRoutes(node.netns)).get('203.0.113.0/24') === router!.address);
    const client = new GobgpClient({ target: `unix://${agent!.apiSocket}` });
    try {
      const fromRouter = (await client.listGlobalPaths('AFI_IP')).filter((p) => p.neighborIp === router!.address).map((p) => pathPrefix(p));
      expect(fromRouter).toEqual(['203.0.113.0/24']);
    } finally {
      client.close();
    }
    const routes = await injectedRoutes(node.netns);
    for (const rejected of ['198.51.100.60/32', '0.0.0.0/0', 'default', '192.168.10.0/24']) expect(routes.has(rejected), rejected).toBe(false);
  }, 60_000);

  it('bad annotations: Warning events on the Node and the Service and failed syncs, while everything valid keeps working', async () => {
    const { node, server } = await setUp(
      { advertiseLoadBalancerIp: true },
      {
        'kube-router.io/node.bgp.communities': 'bogus,65000:1',
        'kube-router.io/path-prepend.as': 'x',
        'kube-router.io/path-prepend.repeat-n': '2',
        'kube-router.io/node.bgp.customimportreject': 'banana,192.168.0.0/16',
      },
      ['192.168.10.0/24', '203.0.113.0/24'],
    );
    server.create(
      service('web', { type: 'LoadBalancer', clusterIP: '10.96.0.70', clusterIPs: ['10.96.0.70'] }, { 'kube-router.io/service.advertise.clusterip': 'maybe' }),
    );
    server.updateStatus({ ...server.get('v1', 'Service', namespace, 'web')!, status: { loadBalancer: { ingress: [{ ip: '198.51.100.70' }] } } });
    await waitFor('the VIP at the peer', hasLearned('198.51.100.70/32'));
    const path = (await router!.paths()).find((p) => pathPrefix(p) === '198.51.100.70/32')!;
    expect(communities(path)).toEqual(['65000:1']);
    expect(asPath(path)).toEqual([CLUSTER_ASN]);
    await waitFor('the valid reject CIDR honoured, the other route accepted', async () => {
      const routes = await injectedRoutes(node.netns);
      return routes.get('203.0.113.0/24') === router!.address && !routes.has('192.168.10.0/24');
    });
    await waitFor('Warning events', () => warnings('InvalidAnnotation', 'Node').length >= 3 && warnings('InvalidAnnotation', 'Service').length >= 1, 10_000);
    const nodeMessages = warnings('InvalidAnnotation', 'Node').map((e) => e.message ?? '');
    expect(nodeMessages.some((m) => m.includes('"bogus" is not a community'))).toBe(true);
    expect(nodeMessages.some((m) => m.includes('"x" is not an ASN'))).toBe(true);
    expect(nodeMessages.some((m) => m.includes('"banana" is not a CIDR'))).toBe(true);
    expect(warnings('InvalidAnnotation', 'Service')[0]!.message).toContain('"maybe" is not true or false');
    expect(await syncFailures()).toBeGreaterThan(0);
    // Fixing the annotations ends the failures.
    const fixed = server.get('v1', 'Node', undefined, node.name)!;
    server.update({ ...fixed, metadata: { ...fixed.metadata, annotations: { 'kube-router.io/node.bgp.communities': '65000:1' } } });
    const web = server.get('v1', 'Service', namespace, 'web')!;
    server.update({ ...web, metadata: { ...web.metadata, annotations: {} } });
    const lastSuccess = async () =>
      (await agent!.metrics.registry.getSingleMetric('kube_router_controller_sync_last_success')!.get()).values.find(
        (v) => v.labels.controller === 'routing-bgp',
      )?.value ?? 0;
    const after = Math.floor(Date.now() / 1000);
    await waitFor('a successful sync', async () => (await lastSuccess()) >= after, 15_000);
  }, 60_000);
});

function asPath(path: ApiPath): number[] {
  const attribute = path.pattrs?.find((a) => a['@type'] === anyType('AsPathAttribute')) as { segments?: { numbers?: number[] }[] } | undefined;
  return (attribute?.segments ?? []).flatMap((s) => s.numbers ?? []);
}

function communities(path: ApiPath): string[] {
  const attribute = path.pattrs?.find((a) => a['@type'] === anyType('CommunitiesAttribute')) as { communities?: number[] } | undefined;
  return (attribute?.communities ?? []).map((c) => `${Math.floor(c / 65_536)}:${c % 65_536}`);
}

function nextHop(path: ApiPath): string | undefined {
  const attribute = path.pattrs?.find((a) => a['@type'] === anyType('NextHopAttribute')) as { nextHop?: string } | undefined;
  return attribute?.nextHop;
}
