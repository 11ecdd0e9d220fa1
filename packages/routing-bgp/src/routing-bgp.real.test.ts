import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort, labSkipReason, startApiServer, type ApiServer, waitFor } from '@kube-router/testkit';
import { GobgpClient } from './gobgp-api.js';
import {
  createMesh,
  injectedRoutes,
  nodeObject,
  routingAgent,
  sh,
  tcpConnect,
  tcpListener,
  type Mesh,
  type RoutingAgent,
} from './testing/mesh.js';

const skipReason = labSkipReason('gobgpd', 'iptables', 'ipset');

describe.skipIf(skipReason)(`routing-bgp with real gobgpd in network namespaces${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  let mesh: Mesh | undefined;
  let server: ApiServer | undefined;
  let agents: RoutingAgent[] = [];
  const cleanups: (() => void)[] = [];

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) cleanup();
    for (const agent of agents) await agent.stop().catch(() => undefined);
    agents = [];
    await server?.close();
    server = undefined;
    await mesh?.teardown();
    mesh = undefined;
  });

  type AgentOptions = Parameters<typeof routingAgent>[3];
  async function cluster(count: number, options: AgentOptions = {}, dualStack = false, perNode: (index: number) => AgentOptions = () => ({})) {
    mesh = await createMesh(count, { dualStack });
    server = await startApiServer({ port: 0 });
    const kubeconfig = await server.writeKubeconfig();
    for (const node of mesh.nodes) server.create(nodeObject(node));
    const bgpPort = await freePort();
    agents = mesh.nodes.map((node, i) => routingAgent(mesh!, node, kubeconfig, { bgpPort, ...options, ...perNode(i) }));
    const started = Date.now();
    for (const agent of agents) await agent.start();
    return { mesh, server, agents, started };
  }

  /** Every node has a route of route-sync's protocol to every other node's pod CIDR via that node's address. */
  async function converged(nodes: Mesh['nodes']): Promise<boolean> {
    for (const node of nodes) {
      const routes = await injectedRoutes(node.netns);
      for (const other of nodes) {
        if (other !== node && routes.get(other.podCidr) !== other.address) return false;
      }
    }
    return true;
  }

  const lastSuccess = async (agent: RoutingAgent) =>
    (await agent.metrics.registry.getSingleMetric('kube_router_controller_sync_last_success')!.get()).values.find(
      (v) => v.labels.controller === 'routing-bgp',
    )?.value ?? 0;

  const client = (agent: RoutingAgent) => new GobgpClient({ target: `unix://${agent.apiSocket}` });

  it('two nodes converge and a pod on node 1 connects to a pod on node 2 over the learned route', async () => {
    const { mesh, started } = await cluster(2);
    const [n1, n2] = mesh.nodes as [Mesh['nodes'][0], Mesh['nodes'][0]];
    expect(await tcpConnect(n1.podNetns, n2.podIp, 8080, 300)).not.toBe('open');
    await waitFor('two nodes converged', () => converged(mesh.nodes));
    console.log(`two nodes converged ${Date.now() - started} ms after start`);
    cleanups.push(await tcpListener(n2.podNetns, 8080));
    cleanups.push(await tcpListener(n1.podNetns, 8080));
    expect(await tcpConnect(n1.podNetns, n2.podIp, 8080)).toBe('open');
    expect(await tcpConnect(n2.podNetns, n1.podIp, 8080)).toBe('open');
    // --enable-cni: each node's kubeadm CNI file now gives host-local that node's pod CIDR.
    for (const agent of agents) {
      const written = JSON.parse(await readFile(agent.node.cniConfFile, 'utf8')) as { plugins: { ipam: { ranges?: unknown } }[] };
      expect(written.plugins[0]!.ipam.ranges).toEqual([[{ subnet: agent.node.podCidr }]]);
    }
    const peerInfo = async () => (await agents[0]!.metrics.registry.getSingleMetric('kube_router_bgp_peer_info')!.get()).values;
    await waitFor('peer_info established', async () =>
      (await peerInfo()).some((v) => v.labels.address === n2.address && v.labels.state === 'established'));
    expect((await peerInfo()).map((v) => v.labels)).toEqual([{ address: n2.address, type: 'internal', asn: '64512', state: 'established' }]);
    const sent = await agents[0]!.metrics.registry.getSingleMetric('kube_router_controller_bgp_advertisements_sent')!.get();
    expect(sent.values[0]?.value).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it('three nodes converge; a Node deleted from the API loses its peer and its routes on the others', async () => {
    const { mesh, server, agents, started } = await cluster(3);
    await waitFor('three nodes converged', () => converged(mesh.nodes));
    console.log(`three nodes converged ${Date.now() - started} ms after start`);
    const [n1, n2, n3] = mesh.nodes as [Mesh['nodes'][0], Mesh['nodes'][0], Mesh['nodes'][0]];
    cleanups.push(await tcpListener(n3.podNetns, 8080));
    expect(await tcpConnect(n1.podNetns, n3.podIp, 8080)).toBe('open');

    // node-3's agent stops with its Node (a drained node): its gobgpd goes, and the others must drop it from the API.
    await agents[2]!.stop();
    server.delete('v1', 'Node', undefined, n3.name);
    const removed = Date.now();
    for (const agent of agents.slice(0, 2)) {
      const api = client(agent);
      try {
        await waitFor(`${agent.node.name} drops the peer of node-3`, async () =>
          (await api.listPeers()).every((p) => p.conf?.neighborAddress !== n3.address));
      } finally {
        api.close();
      }
      await waitFor(`${agent.node.name} drops the route to node-3's pods`, async () => !(await injectedRoutes(agent.node.netns)).has(n3.podCidr));
    }
    console.log(`node-3's peer and routes gone ${Date.now() - removed} ms after its Node was deleted`);
    expect((await injectedRoutes(n1.netns)).get(n2.podCidr)).toBe(n2.address);
    expect(await tcpConnect(n1.podNetns, n3.podIp, 8080, 500)).not.toBe('open');
  }, 90_000);

  it('gobgpd killed is restarted by the plugin, routes come back, and health stays green throughout', async () => {
    const { mesh, agents } = await cluster(2);
    await waitFor('two nodes converged', () => converged(mesh.nodes));
    const [n1, n2] = mesh.nodes as [Mesh['nodes'][0], Mesh['nodes'][0]];
    let unhealthy = 0;
    let probes = 0;
    const watcher = setInterval(() => {
      probes++;
      for (const agent of agents) if (agent.health.livenessChecks().some((c) => !c.ok)) unhealthy++;
    }, 50);
    cleanups.push(() => clearInterval(watcher));
    // node-1 keeps its route to node-2's pods while its own gobgpd restarts (the routes handed over are retained).
    let node1Checks = 0;
    let node1Missing = 0;
    let watching = true;
    cleanups.push(() => (watching = false));
    const node1Watch = (async () => {
      while (watching) {
        node1Checks++;
        if ((await injectedRoutes(n1.netns)).get(n2.podCidr) !== n2.address) node1Missing++;
        await new Promise((r) => setTimeout(r, 100));
      }
    })();

    const gobgpdPids = async () => (await sh('ip', ['netns', 'pids', n1.netns])).split('\n').filter(Boolean);
    const [before] = await gobgpdPids();
    expect(before).toBeDefined();
    process.kill(Number(before), 'SIGKILL');
    const killed = Date.now();
    // node-2 loses the session, so its route to node-1's pods goes...
    await waitFor('node-2 withdraws node-1 pods', async () => !(await injectedRoutes(n2.netns)).has(n1.podCidr), 20_000);
    // ...and comes back once the plugin restarted and re-configured node-1's gobgpd.
    await waitFor('routes back on both nodes', () => converged(mesh.nodes), 40_000);
    const [after] = await gobgpdPids();
    expect(after).toBeDefined();
    expect(after).not.toBe(before);
    console.log(`gobgpd restarted and routes back ${Date.now() - killed} ms after the kill; ${probes} health probes, ${unhealthy} unhealthy`);
    cleanups.push(await tcpListener(n1.podNetns, 8080));
    expect(await tcpConnect(n2.podNetns, n1.podIp, 8080)).toBe('open');
    expect(unhealthy).toBe(0);
    watching = false;
    await node1Watch;
    console.log(`node-1's route to node-2 checked ${node1Checks} times during the restart, missing ${node1Missing} times`);
    expect(node1Missing).toBe(0);
  }, 90_000);

  it('a gobgpd that exits at once: routing-bgp not ready naming it, its failed syncs counted, liveness kept', async () => {
    // A stand-in for a gobgpd that cannot run (a bad build, a missing library): it exits with code 3 at once.
    const dir = await mkdtemp(join(tmpdir(), 'tbgp-crash-'));
    cleanups.push(() => void rm(dir, { recursive: true, force: true }));
    const binary = join(dir, 'gobgpd');
    await writeFile(binary, '#!/bin/sh\nexit 3\n', { mode: 0o755 });
    const { agents } = await cluster(1, { gobgpdBinary: binary });
    const agent = agents[0]!;
    const failures = async () =>
      (await agent.metrics.registry.getSingleMetric('kube_router_controller_sync_failures_total')!.get()).values.find((v) => v.labels.controller === 'routing-bgp')?.value ?? 0;
    await waitFor('two failed syncs', async () => (await failures()) >= 2, 30_000);
    const gobgpd = agent.health.readinessChecks().find((check) => check.name === 'routing-bgp/gobgpd');
    // Never ready while it crash-loops, not even in the moment a restarted one runs before it exits again.
    expect(gobgpd).toMatchObject({ ok: false, reason: expect.stringMatching(/^gobgpd exited with code 3; (restarting in|restarted) \d+ ms/) });
    expect(agent.health.livenessChecks().every((check) => check.ok)).toBe(true);
  }, 60_000);

  it('a Node whose address does not parse leaves the existing peers and routes in place', async () => {
    const { mesh, server, agents } = await cluster(2);
    await waitFor('two nodes converged', () => converged(mesh.nodes));
    const [n1, n2] = mesh.nodes as [Mesh['nodes'][0], Mesh['nodes'][0]];
    server.patchStatus('v1', 'Node', undefined, n2.name, { status: { addresses: [{ type: 'InternalIP', address: '10.77.0.two' }] } }, 'merge');
    const failures = async () =>
      (await agents[0]!.metrics.registry.getSingleMetric('kube_router_controller_sync_failures_total')!.get()).values.find(
        (v) => v.labels.controller === 'routing-bgp',
      )?.value ?? 0;
    const before = await failures();
    // Two failed syncs after the change: the deletion is deferred every time, not only once.
    await waitFor('node-1 fails syncs on the unparsable address', async () => (await failures()) >= before + 2, 20_000);
    const api = client(agents[0]!);
    try {
      const peers = await api.listPeers();
      expect(peers.map((p) => p.conf?.neighborAddress)).toContain(n2.address);
      expect(peers.find((p) => p.conf?.neighborAddress === n2.address)?.state?.sessionState).toBe('ESTABLISHED');
    } finally {
      api.close();
    }
    expect((await injectedRoutes(n1.netns)).get(n2.podCidr)).toBe(n2.address);
    await waitFor('a Warning event on node-2', () =>
      server.list('v1', 'Event').some((e) => (e as { reason?: string }).reason === 'InvalidNodeAddress'), 10_000);
    // The address comes back: the sync succeeds again and nothing was torn down.
    server.patchStatus('v1', 'Node', undefined, n2.name, { status: { addresses: [{ type: 'InternalIP', address: n2.address }] } }, 'merge');
    const healed = Math.ceil(Date.now() / 1000);
    await waitFor('sync succeeds again', async () => (await lastSuccess(agents[0]!)) >= healed, 20_000);
  }, 90_000);

  it('dual-stack: IPv6 pod CIDRs are announced with IPv6 next hops over the IPv4 session and routed', async () => {
    // IPv6 is routed only with --enable-ipv6, as in kube-router (its default is IPv4 alone).
    const { mesh } = await cluster(2, { enableIpv6: true }, true);
    const [n1, n2] = mesh.nodes as [Mesh['nodes'][0], Mesh['nodes'][0]];
    await waitFor('IPv4 converged', () => converged(mesh.nodes));
    await waitFor('IPv6 routes', async () =>
      (await injectedRoutes(n1.netns, '-6')).get(n2.podCidr6!) === n2.address6 &&
      (await injectedRoutes(n2.netns, '-6')).get(n1.podCidr6!) === n1.address6);
    cleanups.push(await tcpListener(n2.podNetns, 8080));
    expect(await tcpConnect(n1.podNetns, n2.podIp6!, 8080)).toBe('open');
    expect(await tcpConnect(n1.podNetns, n2.podIp, 8080)).toBe('open');
  }, 60_000);

  it('--advertise-pod-cidr=false keeps pod CIDRs from external peers only: the mesh still routes them (kube-router)', async () => {
    // What external peers get is in vips.real.test.ts; here the mesh converges as with the flag on.
    const { mesh, agents } = await cluster(2, {}, false, (i) => (i === 1 ? { advertisePodCidr: false } : {}));
    await waitFor('two nodes converged', () => converged(mesh.nodes));
    const after = Math.ceil(Date.now() / 1000);
    for (const agent of agents) await waitFor(`${agent.node.name} syncs`, async () => (await lastSuccess(agent)) >= after, 15_000);
    expect(await converged(mesh.nodes)).toBe(true);
  }, 60_000);

  it('enables pod egress: the MASQUERADE rule and its sets in the node namespace, removed by cleanup', async () => {
    const { mesh } = await cluster(2, { enablePodEgress: true });
    await waitFor('two nodes converged', () => converged(mesh.nodes));
    const n1 = mesh.nodes[0]!;
    const masquerades = async () => (await sh('iptables', ['-t', 'nat', '-S', 'POSTROUTING'], n1.netns)).split('\n').filter((l) => l.includes('MASQUERADE'));
    await waitFor('egress rule', async () => (await masquerades()).length > 0);
    // With --random-fully, as kube-router writes it where iptables has it (1.6.2 on).
    expect(await masquerades()).toEqual([expect.stringMatching(/--match-set kube-router-pod-subnets src .* -j MASQUERADE --random-fully$/)]);
    // The same rule without it, and kube-router's older one without the node-ips match, are removed at the next sync,
    // not kept beside ours (kube-router's deleteBadPodEgressRules).
    const plain = ['-m', 'set', '--match-set', 'kube-router-pod-subnets', 'src', '-m', 'set', '!', '--match-set', 'kube-router-pod-subnets', 'dst'];
    await sh('iptables', ['-t', 'nat', '-A', 'POSTROUTING', ...plain, '-m', 'set', '!', '--match-set', 'kube-router-node-ips', 'dst', '-j', 'MASQUERADE'], n1.netns);
    await sh('iptables', ['-t', 'nat', '-A', 'POSTROUTING', ...plain, '-j', 'MASQUERADE'], n1.netns);
    // No count of three here: a sync may already have removed them (a loaded run saw two). Each append above succeeded or threw.
    await waitFor('the plain and the old rules removed', async () => (await masquerades()).length === 1, 15_000);
    expect(await masquerades()).toEqual([expect.stringMatching(/--random-fully$/)]);
    const members = await sh('ipset', ['list', 'kube-router-pod-subnets'], n1.netns);
    expect(members).toContain('10.78.1.0/24');
    expect(members).toContain('10.78.2.0/24');
    for (const agent of agents) await agent.stop();
    agents = [];
    const { routingBgpPlugin } = await import('./plugin.js');
    const pino = (await import('pino')).default;
    const cleanup = () =>
      routingBgpPlugin.cleanup!({ nodeName: n1.name, logger: pino({ level: 'silent' }) }, routingBgpPlugin.options.parse({ netns: n1.netns }));
    await cleanup();
    // Nothing left to remove is not an error.
    await cleanup();
    expect(await sh('iptables', ['-t', 'nat', '-S', 'POSTROUTING'], n1.netns)).not.toContain('MASQUERADE');
    expect(await sh('ipset', ['list', '-n'], n1.netns)).not.toContain('kube-router');
  }, 60_000);
});
