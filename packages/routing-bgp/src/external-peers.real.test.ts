import { afterEach, describe, expect, it } from 'vitest';
import { freePort, labSkipReason, startApiServer, type ApiServer, waitFor } from '@kube-router/testkit';
import { GobgpClient, type PeerConfig } from './gobgp-api.js';
import { createMesh, injectedRoutes, nodeObject, routingAgent, sh, tcpConnect, tcpListener, type Mesh, type MeshNode, type RoutingAgent } from './testing/mesh.js';
import { killGobgpd, routerPrefix, startExternalRouter, type ExternalRouter, type ExternalRouterOptions } from './testing/external-router.js';

const skipReason = labSkipReason('gobgpd', 'iptables', 'ipset');
const b64 = (text: string) => Buffer.from(text).toString('base64');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(skipReason)(`routing-bgp external peers, route reflection and graceful restart with real gobgpd${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  let mesh: Mesh | undefined;
  let server: ApiServer | undefined;
  let kubeconfig = '';
  let bgpPort = 0;
  let agents: RoutingAgent[] = [];
  let routers: ExternalRouter[] = [];
  const prefix = routerPrefix();
  const cleanups: (() => void)[] = [];

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) cleanup();
    for (const agent of agents) await agent.stop().catch(() => undefined);
    agents = [];
    for (const router of routers) await router.teardown();
    routers = [];
    await server?.close();
    server = undefined;
    await mesh?.teardown();
    mesh = undefined;
  });

  type AgentOptions = Parameters<typeof routingAgent>[3];

  /** The mesh, its Nodes (with annotations) in the API server, and no agent yet. */
  async function cluster(count: number, annotations: (index: number) => Record<string, string> = () => ({})) {
    mesh = await createMesh(count);
    server = await startApiServer({ port: 0 });
    kubeconfig = await server.writeKubeconfig();
    mesh.nodes.forEach((node, i) => server!.create(nodeObject(node, annotations(i))));
    bgpPort = await freePort();
    return { mesh, server };
  }

  async function router(options: Omit<ExternalRouterOptions, 'neighbors'> & { neighbors?: Partial<PeerConfig>[] }) {
    const neighbors = (options.neighbors ?? []).map((n) => ({ peerAsn: 64_512, remotePort: bgpPort, holdTimeSeconds: 9, families: ['AFI_IP'] as const, neighborAddress: '', ...n }));
    const started = await startExternalRouter(mesh!, prefix, { ...options, neighbors });
    routers.push(started);
    return started;
  }

  async function startAgent(node: MeshNode, options: AgentOptions = {}) {
    const agent = routingAgent(mesh!, node, kubeconfig, { bgpPort, ...options });
    agents.push(agent);
    await agent.start();
    return agent;
  }

  const client = (agent: RoutingAgent) => new GobgpClient({ target: `unix://${agent.apiSocket}` });
  const established = (state: string | undefined) => state?.includes('ESTABLISHED') ?? false;
  const failuresOf = async (agent: RoutingAgent) =>
    (await agent.metrics.registry.getSingleMetric('kube_router_controller_sync_failures_total')!.get()).values.find(
      (v) => v.labels.controller === 'routing-bgp',
    )?.value ?? 0;
  const warnings = (reason: string, node: string) =>
    server!.list('v1', 'Event').filter((e) => {
      const event = e as { reason?: string; involvedObject?: { name?: string } };
      return event.reason === reason && event.involvedObject?.name === node;
    });

  it('eBGP peers from the options: TCP MD5, their own port, routes both ways; a wrong password never establishes; a flap is recovered', async () => {
    const { mesh } = await cluster(1);
    const n1 = mesh.nodes[0]!;
    const [port1, port2] = [await freePort(), await freePort()];
    const r1 = await router({ index: 1, asn: 65_001, listenPort: port1, announce: ['10.99.1.0/24'], neighbors: [{ neighborAddress: n1.address, password: 'kube-md5' }] });
    const r2 = await router({ index: 2, asn: 65_002, listenPort: port2, announce: ['10.99.2.0/24'], neighbors: [{ neighborAddress: n1.address, password: 'right' }] });
    const started = Date.now();
    const agent = await startAgent(n1, {
      peerRouters: [
        { address: r1.address, asn: 65_001, port: port1, password: 'kube-md5' },
        { address: r2.address, asn: 65_002, port: port2, password: 'wrong' },
      ],
    });
    await waitFor('r1 learns the pod CIDR', async () => (await r1.learnedFrom(n1.address)).includes(n1.podCidr));
    await waitFor('node-1 routes r1’s prefix', async () => (await injectedRoutes(n1.netns)).get('10.99.1.0/24') === r1.address);
    console.log(`external eBGP peer with MD5 converged ${Date.now() - started} ms after start`);
    const peerInfo = async () => (await agent.metrics.registry.getSingleMetric('kube_router_bgp_peer_info')!.get()).values.map((v) => v.labels);
    await waitFor('peer_info', async () => (await peerInfo()).some((l) => l.address === r1.address && l.state === 'established'));
    expect((await peerInfo()).find((l) => l.address === r1.address)).toEqual({ address: r1.address, type: 'external', asn: '65001', state: 'established' });
    // The MD5 mismatch: the kernel drops every segment of the session, so it never gets past connect/active.
    await sleep(5_000);
    expect(established(await r2.sessionState(n1.address))).toBe(false);
    expect(established((await client(agent).listPeers()).find((p) => p.conf?.neighborAddress === r2.address)?.state?.sessionState)).toBe(false);
    expect((await injectedRoutes(n1.netns)).has('10.99.2.0/24')).toBe(false);

    // A flap: the router drops the session (deconfigures and configures the node again); everything comes back.
    await r1.api.deletePeer(n1.address);
    await waitFor('node-1 drops r1’s route', async () => !(await injectedRoutes(n1.netns)).has('10.99.1.0/24'), 15_000);
    const flapped = Date.now();
    await r1.api.addPeer({ neighborAddress: n1.address, peerAsn: 64_512, remotePort: bgpPort, holdTimeSeconds: 9, families: ['AFI_IP'], password: 'kube-md5' });
    await waitFor('node-1 routes r1’s prefix again', async () => (await injectedRoutes(n1.netns)).get('10.99.1.0/24') === r1.address, 30_000);
    await waitFor('r1 learns the pod CIDR again', async () => (await r1.learnedFrom(n1.address)).includes(n1.podCidr), 30_000);
    console.log(`a peer flap recovered ${Date.now() - flapped} ms after the router configured the node again`);
  }, 120_000);

  it('peers from Node annotations: kube-router.io/peers (local address) and the per-field ones (port, password); bad input warns, fails and keeps the peers', async () => {
    const port1 = await freePort();
    const peersYaml = (extra = '') => `- remoteip: 10.77.0.101\n  remoteasn: 65001\n  localip: 10.77.0.51\n  port: ${port1}\n${extra}`;
    const { mesh, server } = await cluster(2, (i): Record<string, string> =>
      i === 0
        ? { 'kube-router.io/peers': peersYaml() }
        : {
            'kube-router.io/peer.ips': '10.77.0.101',
            'kube-router.io/peer.asns': '65001',
            'kube-router.io/peer.ports': String(port1),
            'kube-router.io/peer.passwords': b64('node-2 secret'),
          },
    );
    const [n1, n2] = mesh.nodes as [MeshNode, MeshNode];
    // node-1 dials from a second address of its own.
    await sh('ip', ['addr', 'add', '10.77.0.51/24', 'dev', 'eth0'], n1.netns);
    const r1 = await router({
      index: 1,
      asn: 65_001,
      listenPort: port1,
      announce: ['10.99.1.0/24'],
      neighbors: [{ neighborAddress: '10.77.0.51' }, { neighborAddress: n2.address, password: 'node-2 secret' }],
    });
    const [a1, a2] = [await startAgent(n1), await startAgent(n2)];
    await waitFor('r1 learns both pod CIDRs', async () =>
      (await r1.learnedFrom('10.77.0.51')).includes(n1.podCidr) && (await r1.learnedFrom(n2.address)).includes(n2.podCidr));
    await waitFor('the nodes mesh as well', async () => (await injectedRoutes(n1.netns)).get(n2.podCidr) === n2.address);
    await waitFor('node-2 routes r1’s prefix', async () => (await injectedRoutes(n2.netns)).get('10.99.1.0/24') === r1.address);

    // Unparsable YAML: a Warning on node-1 and failed syncs, but the session configured from it stays.
    const failuresBefore = await failuresOf(a1);
    server.patch('v1', 'Node', undefined, n1.name, { metadata: { annotations: { 'kube-router.io/peers': '- remoteip: [10.77.0.101' } } }, 'merge');
    await waitFor('a Warning event on node-1', () => warnings('InvalidExternalPeer', n1.name).length > 0, 15_000);
    await waitFor('failed syncs on node-1', async () => (await failuresOf(a1)) > failuresBefore + 1, 20_000);
    expect(String((warnings('InvalidExternalPeer', n1.name)[0] as { message?: string }).message)).toContain('kube-router.io/peers is not valid YAML');
    expect(established(await r1.sessionState('10.77.0.51'))).toBe(true);
    expect((await injectedRoutes(n1.netns)).get('10.99.1.0/24')).toBe(r1.address);

    // 900 nested brackets (2 KB) ended the process on the second sync that read them: refused before parsing now.
    const failuresBeforeNesting = await failuresOf(a1);
    server.patch('v1', 'Node', undefined, n1.name, { metadata: { annotations: { 'kube-router.io/peers': '['.repeat(900) + ']'.repeat(900) } } }, 'merge');
    await waitFor('a Warning naming the nesting', () =>
      warnings('InvalidExternalPeer', n1.name).some((e) => String((e as { message?: string }).message).includes('kube-router.io/peers nests collections deeper')), 15_000);
    await waitFor('three failed syncs on node-1 read it', async () => (await failuresOf(a1)) > failuresBeforeNesting + 2, 30_000);
    expect(established(await r1.sessionState('10.77.0.51'))).toBe(true);

    // A bad ASN and a bad address next to the good entry: the good one keeps working.
    server.patch('v1', 'Node', undefined, n1.name, {
      metadata: { annotations: { 'kube-router.io/peers': peersYaml('- {remoteip: 10.77.0.102, remoteasn: 64000}\n- {remoteip: 10.77.0.300, remoteasn: 65003}\n') } },
    }, 'merge');
    await waitFor('warnings name both entries', () =>
      warnings('InvalidExternalPeer', n1.name).some((e) => /entry 2: remoteasn ASN 64000 is reserved; .*entry 3: remoteip/.test(String((e as { message?: string }).message))), 15_000);
    // A password that is not base64 on node-2: its peer stays too.
    server.patch('v1', 'Node', undefined, n2.name, { metadata: { annotations: { 'kube-router.io/peer.passwords': 'not base64!' } } }, 'merge');
    await waitFor('a Warning event on node-2', () =>
      warnings('InvalidExternalPeer', n2.name).some((e) => String((e as { message?: string }).message).includes('peer.passwords entry 1: the password is not base64')), 15_000);
    const failures2 = await failuresOf(a2);
    await waitFor('failed syncs on node-2', async () => (await failuresOf(a2)) > failures2, 20_000);
    expect(established(await r1.sessionState('10.77.0.51'))).toBe(true);
    expect(established(await r1.sessionState(n2.address))).toBe(true);
    expect((await injectedRoutes(n1.netns)).get(n2.podCidr)).toBe(n2.address);

    // The annotation goes: so does the peer.
    server.patch('v1', 'Node', undefined, n1.name, { metadata: { annotations: { 'kube-router.io/peers': null } } }, 'merge');
    await waitFor('node-1 removes the external peer', async () =>
      (await client(a1).listPeers()).every((p) => p.conf?.neighborAddress !== r1.address), 20_000);
    await waitFor('node-1 drops r1’s route', async () => !(await injectedRoutes(n1.netns)).has('10.99.1.0/24'), 15_000);
  }, 150_000);

  it('--peer-router-multihop-ttl: a router one hop away peers only with the node that allows the hop', async () => {
    const { mesh } = await cluster(2);
    const [n1, n2] = mesh.nodes as [MeshNode, MeshNode];
    const port = await freePort();
    // Passive: only the nodes dial, so only their TTL decides.
    const far = await router({
      index: 3,
      asn: 65_003,
      listenPort: port,
      behindGateway: true,
      announce: ['10.99.3.0/24'],
      neighbors: [n1, n2].map((n) => ({ neighborAddress: n.address, passive: true, ebgpMultihopTtl: 2 })),
    });
    const peerRouters = [{ address: far.address, asn: 65_003, port }];
    await startAgent(n1, { peerRouters, peerMultihopTtl: 2 });
    await startAgent(n2, { peerRouters });
    await waitFor('the far router learns node-1’s pod CIDR', async () => (await far.learnedFrom(n1.address)).includes(n1.podCidr));
    await sleep(5_000);
    expect(established(await far.sessionState(n2.address))).toBe(false);
    expect(await far.learnedFrom(n2.address)).toEqual([]);
  }, 90_000);

  it('route reflection in the mesh: clients peer only with the reflector and learn each other’s pod CIDRs through it', async () => {
    const { mesh } = await cluster(3, (i): Record<string, string> => (i === 0 ? { 'kube-router.io/rr.server': '42' } : { 'kube-router.io/rr.client': '42' }));
    const [n1, n2, n3] = mesh.nodes as [MeshNode, MeshNode, MeshNode];
    const started = Date.now();
    const [a1, a2] = [await startAgent(n1), await startAgent(n2), await startAgent(n3)];
    await waitFor('node-2 and node-3 route to each other', async () =>
      (await injectedRoutes(n2.netns)).get(n3.podCidr) === n3.address && (await injectedRoutes(n3.netns)).get(n2.podCidr) === n2.address);
    console.log(`route reflection converged ${Date.now() - started} ms after start`);
    expect((await client(a2!).listPeers()).map((p) => p.conf?.neighborAddress)).toEqual([n1.address]);
    const reflectorPeers = await client(a1!).listPeers();
    expect(reflectorPeers.map((p) => [p.conf?.neighborAddress, p.routeReflector?.routeReflectorClient]).sort()).toEqual([
      [n2.address, true],
      [n3.address, true],
    ]);
    expect(reflectorPeers[0]!.routeReflector?.routeReflectorClusterId).toBe('0.0.0.42');
    cleanups.push(await tcpListener(n3.podNetns, 8080));
    expect(await tcpConnect(n2.podNetns, n3.podIp, 8080)).toBe('open');

    // A cluster id that does not parse: a Warning, a failed sync, and node-2 stays a client (no full mesh on a typo).
    server!.patch('v1', 'Node', undefined, n2.name, { metadata: { annotations: { 'kube-router.io/rr.client': 'cluster-a' } } }, 'merge');
    await waitFor('a Warning event on node-2', () => warnings('InvalidRouteReflectorAnnotation', n2.name).length > 0, 15_000);
    const failures = await failuresOf(a2!);
    await waitFor('failed syncs on node-2', async () => (await failuresOf(a2!)) > failures, 20_000);
    expect((await client(a2!).listPeers()).map((p) => p.conf?.neighborAddress)).toEqual([n1.address]);
  }, 90_000);

  it('kube-router.io/bgp-local-addresses: gobgpd listens there; an address not of this node warns and listens on the node’s address', async () => {
    const { mesh } = await cluster(2, (i): Record<string, string> => ({ 'kube-router.io/bgp-local-addresses': i === 0 ? '10.77.0.1' : '10.77.0.250' }));
    const [n1, n2] = mesh.nodes as [MeshNode, MeshNode];
    const [a1, a2] = [await startAgent(n1), await startAgent(n2)];
    await waitFor('the nodes mesh', async () =>
      (await injectedRoutes(n1.netns)).get(n2.podCidr) === n2.address && (await injectedRoutes(n2.netns)).get(n1.podCidr) === n1.address);
    const listening = async (agent: RoutingAgent) => ((await client(agent).getBgp()) as { listenAddresses?: string[] } | undefined)?.listenAddresses;
    expect(await listening(a1!)).toEqual(['10.77.0.1']);
    // kube-router's default, also the fallback for a bad annotation: the node's own address, not every address.
    expect(await listening(a2!)).toEqual(['10.77.0.2']);
    await sh('ip', ['addr', 'add', '10.77.0.252/24', 'dev', 'eth0'], n2.netns);
    expect(await tcpConnect(n1.netns, '10.77.0.252', bgpPort)).toBe('refused');
    await waitFor('a Warning event on node-2', () => warnings('InvalidBgpLocalAddresses', n2.name).length > 0, 15_000);
    expect(String((warnings('InvalidBgpLocalAddresses', n2.name)[0] as { message?: string }).message)).toContain('10.77.0.250 is not an address of this node');
    expect(String((warnings('InvalidBgpLocalAddresses', n2.name)[0] as { message?: string }).message)).toContain("gobgpd listens on the node's addresses 10.77.0.2");
  }, 60_000);

  it('graceful restart: the router keeps the node’s routes across a gobgpd crash and an agent restart, and the node keeps its routes', async () => {
    const { mesh } = await cluster(2);
    const [n1, n2] = mesh.nodes as [MeshNode, MeshNode];
    const port = await freePort();
    const r1 = await router({
      index: 1,
      asn: 65_001,
      listenPort: port,
      announce: ['10.99.1.0/24'],
      gracefulRestartSeconds: 120,
      neighbors: [n1, n2].map((n) => ({ neighborAddress: n.address, gracefulRestart: { restartTimeSeconds: 120, deferralTimeSeconds: 5 } })),
    });
    // node-2 without graceful restart: the control.
    const grOptions: AgentOptions = {
      peerRouters: [{ address: r1.address, asn: 65_001, port }],
      gracefulRestart: true,
      gracefulRestartTimeSeconds: 60,
      gracefulRestartDeferralTimeSeconds: 5,
    };
    const a1 = await startAgent(n1, grOptions);
    await startAgent(n2, { peerRouters: [{ address: r1.address, asn: 65_001, port }] });
    const routerHas = async (node: MeshNode) => (await r1.learnedFrom(node.address)).includes(node.podCidr);
    const nodeHas = async () => (await injectedRoutes(n1.netns)).get('10.99.1.0/24') === r1.address;
    await waitFor('r1 learns both pod CIDRs', async () => (await routerHas(n1)) && (await routerHas(n2)));
    await waitFor('node-1 routes r1’s prefix', nodeHas);

    /** Polls until `done`, failing at the first moment the router or node-1 lacks a route. */
    const keepsRoutesUntil = async (what: string, done: () => Promise<boolean>, { nodeRoutes = true } = {}) => {
      const started = Date.now();
      while (!(await done())) {
        if (!(await routerHas(n1))) throw new Error(`${what}: r1 lost node-1’s pod CIDR after ${Date.now() - started} ms`);
        if (nodeRoutes && !(await nodeHas())) throw new Error(`${what}: node-1 lost its route to 10.99.1.0/24 after ${Date.now() - started} ms`);
        if (Date.now() - started > 60_000) throw new Error(`${what}: not back within 60 s`);
        await sleep(200);
      }
      return Date.now() - started;
    };
    const sessionBack = async () => established(await r1.sessionState(n1.address)) && !(await r1.paths()).some((p) => p.neighborIp === n1.address && (p as { stale?: boolean }).stale);

    // 1. gobgpd dies under the running agent; the supervisor restarts it and the next sync configures it again.
    await killGobgpd(n1.netns);
    await waitFor('r1 sees the session drop', async () => !established(await r1.sessionState(n1.address)), 15_000);
    const crashRecovery = await keepsRoutesUntil('gobgpd crash', sessionBack);
    console.log(`graceful restart: gobgpd crash recovered in ${crashRecovery} ms, routes kept on both sides`);

    // 2. The agent stops (gobgpd is killed, no Cease) and a new one starts.
    await a1.stop();
    agents = agents.filter((a) => a !== a1);
    await sleep(2_000);
    expect(await routerHas(n1)).toBe(true);
    expect(await nodeHas()).toBe(true);
    const restarted = Date.now();
    await startAgent(n1, grOptions);
    // The router keeps node-1's routes until the new session is up and has sent them again. (The node's kernel routes
    // are route-sync's: a new agent's route-sync reconciles them before routing-bgp relearned them.)
    await keepsRoutesUntil('agent restart', sessionBack, { nodeRoutes: false });
    await waitFor('node-1 routes r1’s prefix after the restart', nodeHas, 30_000);
    console.log(`graceful restart: agent restart re-established in ${Date.now() - restarted} ms, r1 kept node-1’s routes`);

    // The control: the same crash on node-2, which runs without graceful restart, loses its routes on the router.
    await killGobgpd(n2.netns);
    const killed = Date.now();
    await waitFor('r1 drops node-2’s pod CIDR', async () => !(await routerHas(n2)), 5_000);
    console.log(`without graceful restart r1 dropped node-2's routes ${Date.now() - killed} ms after its gobgpd was killed`);
  }, 180_000);
});
