import type { V1Node, V1Service } from '@kubernetes/client-node';
import { ServiceRegistry, type Controller } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import { RecordingRunner } from '@kube-router/netfilter';
import { waitFor } from '@kube-router/testkit';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createRoutingController } from './controller.js';
import type { RoutingSettings } from './settings.js';
import { FakeGobgpd, listed } from './testing/fake-gobgpd.js';
import { fakeNodes, meshNode as node } from './testing/nodes.js';


function harness(options: { nodes: V1Node[]; settings?: Partial<RoutingSettings>; services?: () => V1Service[]; gobgpd?: FakeGobgpd }) {
  const gobgpd = options.gobgpd ?? new FakeGobgpd();
  const kube = fakeNodes(options.nodes);
  const settings: RoutingSettings = {
    syncPeriodMs: 60_000,
    bgpPort: 1790,
    holdTimeSeconds: 90,
    clusterAsn: 64_512,
    nodesFullMesh: true,
    enableIbgp: true,
    advertisePodCidr: true,
    vipFlags: { advertiseClusterIp: false, advertiseExternalIp: false, advertiseLoadBalancerIp: false },
    overrideNextHop: false,
    enablePodEgress: false,
    apiTarget: 'unix:///nowhere',
    manageGobgpd: false,
    gobgpdBinary: 'gobgpd',
    apiTimeoutMs: 1_000,
    restartGraceMs: 1_000,
    peerRouters: [],
    peerMultihopTtl: 0,
    ...options.settings,
  };
  const runner = new RecordingRunner().on('ip', { stdout: '[]' });
  const metrics = new AgentMetrics({ collectDefaultMetrics: false });
  const controller: Controller = createRoutingController(
    {
      nodeName: 'node-1',
      logger: pino({ level: 'silent' }),
      metrics,
      health: new HealthRegistry({ defaultGraceMs: 5_000 }),
      services: new ServiceRegistry(),
    },
    {
      ...kube.cluster,
      onNodesChanged: () => () => undefined,
      services: { list: options.services ?? (() => []), hasSynced: () => true },
      endpointSlices: { listForService: () => [], hasSynced: () => true },
      onServicesChanged: () => () => undefined,
      warnService: (s, reason, message) => kube.warnings.push(`${s.metadata?.name} ${reason}: ${message}`),
    },
    settings,
    {
      routes: { setRoutes: () => undefined, wantedRoutes: () => [] },
      runner,
      gobgp: gobgpd.client(),
    },
  );
  return {
    gobgpd,
    metrics,
    warnings: kube.warnings,
    setNodes: kube.setNodes,
    commands: () => runner.invocations.map((invocation) => invocation.line),
    async sync() {
      await controller.start({ requestSync: () => undefined, signal: new AbortController().signal });
      const outcome = await controller.runObservedSync('test');
      return outcome.ok ? undefined : String((outcome.error as Error).message);
    },
  };
}

const mesh = [node('node-1', '10.0.0.1'), node('node-2', '10.0.0.2'), node('node-3', '10.0.0.3')];

describe('the routing controller against a stand-in gobgpd', () => {
  it('adds no peer while gobgpd has no policy: both peer stages fail with "policy not applied"', async () => {
    const bgp = harness({ nodes: mesh, settings: { peerRouters: [{ address: '192.0.2.1', asn: 65_001 }] } });
    bgp.gobgpd.refusePolicies = true;
    const error = await bgp.sync();
    expect(error).toMatch(/internal-peers.*policy not applied/s);
    expect(error).toMatch(/external-peers.*policy not applied/s);
    expect(bgp.gobgpd.peers.size).toBe(0);
    bgp.gobgpd.refusePolicies = false;
    expect(await bgp.sync()).toBeUndefined();
    expect([...bgp.gobgpd.peers.keys()].sort()).toEqual(['10.0.0.2', '10.0.0.3', '192.0.2.1']);
  });

  it('with --enable-ipv6 on a node without an IPv6 address, routes nothing and says why, as kube-router refuses to', async () => {
    const bgp = harness({ nodes: mesh, settings: { enabledFamilies: { ipv4: true, ipv6: true } } });
    expect(await bgp.sync()).toBe('node node-1: IPv6 was enabled (--enable-ipv6), but no IPv6 address was found on the node');
    expect(bgp.gobgpd.peers.size).toBe(0);
    expect(bgp.warnings).toEqual([expect.stringContaining('node-1 InvalidNodeAddress: cannot route pods: IPv6 was enabled')]);
    const dualStack = mesh.map((n, i) => ({ ...n, status: { addresses: [...n.status!.addresses!, { type: 'InternalIP', address: `fd00::${i + 1}` }] } }));
    bgp.setNodes(dualStack);
    expect(await bgp.sync()).toBeUndefined();
    // As kube-router, IPv6 is switched on for the node, once.
    expect(await bgp.sync()).toBeUndefined();
    expect(bgp.commands().filter((line) => line.includes('disable_ipv6'))).toEqual(['sysctl -q -w net.ipv6.conf.all.disable_ipv6=0']);
  });

  it('without --enable-ipv6, a dual-stack node offers its peers IPv4 unicast only, as kube-router (IPv6 on: both)', async () => {
    const dualStack = mesh.map((n, i) => ({ ...n, status: { addresses: [...n.status!.addresses!, { type: 'InternalIP', address: `fd00::${i + 1}` }] } }));
    const familiesWith = async (enabledFamilies: { ipv4: boolean; ipv6: boolean }) => {
      const bgp = harness({ nodes: dualStack, settings: { enabledFamilies, peerRouters: [{ address: '192.0.2.1', asn: 65_001 }] } });
      expect(await bgp.sync()).toBeUndefined();
      return Object.fromEntries([...bgp.gobgpd.peers].map(([address, peer]) => [address, [...peer.families].sort()]));
    };
    // Offered IPv6 unicast, an IPv4-only peer never sent its End-of-RIB, and with graceful restart gobgpd held back
    // every route for the deferral time (kube-router's advertise-routes DaemonSets on a dual-stack lab node).
    expect(await familiesWith({ ipv4: true, ipv6: false })).toEqual({ '10.0.0.2': ['AFI_IP'], '10.0.0.3': ['AFI_IP'], '192.0.2.1': ['AFI_IP'] });
    expect(await familiesWith({ ipv4: true, ipv6: true })).toEqual({
      '10.0.0.2': ['AFI_IP', 'AFI_IP6'],
      '10.0.0.3': ['AFI_IP', 'AFI_IP6'],
      '192.0.2.1': ['AFI_IP', 'AFI_IP6'],
    });
  });

  it('after an agent restart beside a running gobgpd, its mesh peers are internal in the very first policy', async () => {
    const gobgpd = new FakeGobgpd();
    await harness({ nodes: mesh, gobgpd }).sync();
    const restarted = harness({ nodes: mesh, gobgpd });
    gobgpd.policyHistory.length = 0;
    gobgpd.assignments.clear(); // a policy change forces the restarted agent to push one
    expect(await restarted.sync()).toBeUndefined();
    expect(gobgpd.policyHistory[0]).toMatchObject({ iBGPpeerset: ['10.0.0.2/32', '10.0.0.3/32'], externalpeerset: [] });
  });

  it('lists gobgpd’s peers twice a sync: once for the policies and both peer stages, once for the peer metrics', async () => {
    const bgp = harness({ nodes: mesh, settings: { peerRouters: [{ address: '192.0.2.1', asn: 65_001 }] } });
    // A peer added by hand with gobgp's CLI: gobgpd lists it, no stage owns it, the policies count it as external.
    bgp.gobgpd.extraPeers.push(listed({ neighborAddress: '192.0.2.7', peerAsn: 65_007, remotePort: 179, holdTimeSeconds: 90, families: ['AFI_IP'] }));
    const listings = () => bgp.gobgpd.answered.get('listPeers') ?? 0;
    // The first sync also gives gobgpd its first policy before any peer.
    expect(await bgp.sync()).toBeUndefined();
    expect(listings()).toBe(2);
    // A Node leaves and another joins: the policy after the peer stages names the sessions as they are now, from the
    // one listing and the stages' own changes.
    bgp.setNodes([mesh[0]!, mesh[1]!, node('node-4', '10.0.0.4')]);
    expect(await bgp.sync()).toBeUndefined();
    expect(listings()).toBe(4);
    expect(bgp.gobgpd.calls.slice(-2)).toEqual(['add 10.0.0.4', 'delete 10.0.0.3']);
    expect(bgp.gobgpd.policyHistory.at(-1)).toMatchObject({ iBGPpeerset: ['10.0.0.2/32', '10.0.0.4/32'], externalpeerset: ['192.0.2.1/32', '192.0.2.7/32'] });
  });

  it('a burst of peer state events lists gobgpd’s peers once more after the one running; the metric ends as gobgpd is', async () => {
    const bgp = harness({ nodes: mesh });
    expect(await bgp.sync()).toBeUndefined();
    const listings = () => bgp.gobgpd.answered.get('listPeers') ?? 0;
    const before = listings();
    // A mesh coming up: a state event per peer and FSM step, each of which asks for the metric.
    for (let i = 0; i < 1_000; i++) bgp.gobgpd.watch!.onPeerChange();
    bgp.gobgpd.extraPeers.push({ conf: { neighborAddress: '192.0.2.7', peerAsn: 65_007 }, state: { sessionState: 'SESSION_STATE_ESTABLISHED', type: 'PEER_TYPE_EXTERNAL' } });
    bgp.gobgpd.watch!.onPeerChange();
    const peerInfo = async () => (await bgp.metrics.registry.getSingleMetric('kube_router_bgp_peer_info')!.get()).values.map((v) => v.labels);
    await waitFor('the hand-added peer in kube_router_bgp_peer_info', async () => (await peerInfo()).some((labels) => labels.address === '192.0.2.7'));
    expect(listings() - before).toBe(2);
    expect((await peerInfo()).find((labels) => labels.address === '192.0.2.7')).toEqual({ address: '192.0.2.7', type: 'external', asn: '65007', state: 'established' });
  });

  it('an external peer whose address becomes a Node is kept as an internal peer, never deleted', async () => {
    const bgp = harness({ nodes: mesh.slice(0, 2), settings: { peerRouters: [{ address: '10.0.0.3', asn: 64_512, port: 1790 }] } });
    expect(await bgp.sync()).toBeUndefined();
    bgp.gobgpd.calls.length = 0;
    bgp.setNodes(mesh);
    const error = await bgp.sync();
    expect(error).toContain('10.0.0.3 is a Node of the cluster');
    expect(bgp.gobgpd.calls).not.toContain('delete 10.0.0.3');
    expect(bgp.gobgpd.peers.get('10.0.0.3')?.localAddress).toBe('10.0.0.1');
  });

  it('a Service lister that throws fails the sync, and the peers are still configured', async () => {
    const bgp = harness({
      nodes: mesh,
      services: () => {
        throw new Error('lister broken');
      },
    });
    expect(await bgp.sync()).toMatch(/vip-plan.*lister broken/s);
    expect(bgp.gobgpd.peers.size).toBe(2);
  });

  it('listens on the node’s address by default, and on it (with a Warning) when kube-router.io/bgp-local-addresses is bad', async () => {
    const plain = harness({ nodes: mesh });
    await plain.sync();
    expect(plain.gobgpd.global?.listenAddresses).toEqual(['10.0.0.1']);
    const bad = harness({ nodes: [node('node-1', '10.0.0.1', { 'kube-router.io/bgp-local-addresses': '10.0.0.250' }), ...mesh.slice(1)] });
    expect(await bad.sync()).toContain('bgp-local-addresses');
    expect(bad.gobgpd.global?.listenAddresses).toEqual(['10.0.0.1']);
    expect(bad.warnings.join()).toContain("InvalidBgpLocalAddresses: gobgpd listens on the node's addresses 10.0.0.1");
  });

  it('a duplicate or unusable external peer entry defers no removal; an annotation that does not parse does', async () => {
    const annotated = (peers: string) => [node('node-1', '10.0.0.1', { 'kube-router.io/peers': peers }), ...mesh.slice(1)];
    const bgp = harness({ nodes: annotated('[{remoteip: 192.0.2.1, remoteasn: 65001}, {remoteip: 192.0.2.2, remoteasn: 65002}]') });
    expect(await bgp.sync()).toBeUndefined();
    // One peer gone, the other listed twice: a permanent mistake, so 192.0.2.2 is removed at once.
    bgp.setNodes(annotated('[{remoteip: 192.0.2.1, remoteasn: 65001}, {remoteip: 192.0.2.1, remoteasn: 65001}, {remoteip: "2001:db8::1", remoteasn: 65003}]'));
    expect(await bgp.sync()).toMatch(/listed twice/);
    expect(bgp.gobgpd.peers.has('192.0.2.2')).toBe(false);
    expect(bgp.warnings.at(-1)).toMatch(/2 external BGP peer entries are not used \(the other peers are configured\)/);
    // An entry that does not parse might be 192.0.2.1: it stays.
    bgp.setNodes(annotated('[{remoteip: 192.0.2.3, remoteasn: 65003}, {remoteip: 192.0.2.1, remoteasn: nope}]'));
    expect(await bgp.sync()).toMatch(/remoteasn/);
    expect([...bgp.gobgpd.peers.keys()]).toContain('192.0.2.1');
  });
});
