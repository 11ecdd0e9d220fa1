// 300 nodes (issue 34, "nodes"): the agent's iBGP full mesh with every other node of a large cluster. One BIRD 2 in
// one namespace speaks for all the other nodes: one `protocol bgp` per simulated node, each from its own address (the
// node's InternalIP) on its own veth (see birdNamespace), each announcing only that node's pod CIDR. The agent's node (routing-bgp and
// route-sync as the agent assembles them, with the agent's sync limits, in this process) sits in another namespace;
// the embedded API server holds every Node, so the plugin peers with each of BIRD's addresses.
//
// Per size (NODES_SIZES, default 10,300: nodes in the cluster, the agent's included), in a fresh set-up:
//   - converge: from the agent's start until every peer is ESTABLISHED in the agent's gobgpd and every other node's
//     pod CIDR is in the kernel (route-sync's gauge of installed routes, then checked with `ip route`);
//   - join (NODES_ROUNDS rounds, default 5, median): BIRD's protocol for a new node added (`birdc configure`) and its
//     Node created; until its session is ESTABLISHED (a peer-event watch on the agent's gobgpd) and its route is in
//     the kernel;
//   - leave: the Node deleted and its BIRD protocol removed; until its route is gone from the kernel and its peer
//     from the agent's gobgpd;
//   - RSS of the agent's gobgpd, of BIRD and of this process (the plugins run in it, as in the agent);
//   - for the causes: gobgpd's AddPeer, DeletePeer and ListPeer at this size, the plugin's sync times in the rounds,
//     and (NODES_BIRD_PASSIVE=1) convergence without BIRD dialling the agent.
// The join and leave ratios largest/smallest size are the goal's figures (within 1.2x). Needs root, gobgpd, BIRD 2.
// Namespaces: `tbgp` + 4 random letters (`-ul`, `-n1`, `-p1`, `-bird`). Never passes or fails on times.
import * as grpc from '@grpc/grpc-js';
import { startApiServer, waitFor, type ApiServer } from '@kube-router/testkit';
import { reportBench } from '@kube-router/testkit/bench';
import { bgpRoutersSkipReason, renderBirdConfig, startBird, type BgpRouter, type BgpRouterConfig } from '@kube-router/testkit/bgp-routers';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { GobgpClient, loadGobgpApi } from '../src/gobgp-api.js';
import { isLocalPath, pathPrefix } from '../src/paths.js';
import { createMesh, nodeObject, routingAgent, runner, sh, type Mesh, type MeshNode, type RoutingAgent } from '../src/testing/mesh.js';
import { AGENT_ROUTE_SYNC_LIMITS, AGENT_ROUTING_LIMITS, deleteNetns, median, pidIn, rssMiB, sleep } from './shared.js';

const SIZES = (process.env.NODES_SIZES ?? '10,300').split(',').map((size) => Number(size.trim()));
const ROUNDS = Number(process.env.NODES_ROUNDS ?? 5);
const BIRD_PASSIVE = process.env.NODES_BIRD_PASSIVE === '1';
const CLUSTER_ASN = 64_512;
const WAIT_MS = Number(process.env.NODES_WAIT_MS ?? 300_000);
if (SIZES.some((size) => !Number.isInteger(size) || size < 2 || size > 1_000) || !Number.isInteger(ROUNDS) || ROUNDS < 1) {
  console.error(`NODES_SIZES must be whole numbers from 2 to 1000 (got "${process.env.NODES_SIZES}"), NODES_ROUNDS at least 1`);
  process.exit(2);
}
const skip = bgpRoutersSkipReason('bird');
if (skip) {
  console.log(`routing-bgp nodes: skipped (${skip})`);
  process.exit(0);
}

/** A node BIRD speaks for: its address on BIRD's link (10.77.1.1, ...; the agent is 10.77.0.1) and pod CIDR. */
interface SimNode {
  name: string;
  address: string;
  podCidr: string;
  protocol: string;
  /** Its link in BIRD's namespace (`s<n>`; `b<n>` on the underlay bridge). */
  link: string;
}
/** BIRD's own router id; each protocol has its node's address as its router id. */
const BIRD_ROUTER_ID = '10.77.0.254';
const simNode = (j: number): SimNode => ({
  name: `sim-${j + 1}`,
  address: `10.77.${1 + Math.floor(j / 250)}.${1 + (j % 250)}`,
  podCidr: `10.${80 + Math.floor(j / 256)}.${j % 256}.0/24`,
  protocol: `sim${j + 1}`,
  link: `s${j + 1}`,
});

/**
 * BIRD's namespace `<prefix>-bird`: one veth per simulated node (`s<n>`, its other end `b<n>` on the underlay bridge)
 * with that node's address. One link per node, not one link with every address: BIRD 2.0 locks a BGP session by
 * (neighbor address, port, interface), so its protocols to the same neighbor (the agent's address) must each name
 * a different interface, or all but one wait in Idle for the lock. ARP answers only on the link that has the
 * address (arp_ignore), so the agent reaches each node's address on its own link.
 */
async function birdNamespace(mesh: Mesh, nodes: readonly SimNode[], created: string[]): Promise<string> {
  const netns = `${mesh.prefix}-bird`;
  const underlay = `${mesh.prefix}-ul`;
  await sh('ip', ['netns', 'add', netns]);
  created.push(netns);
  await sh('ip', ['link', 'set', 'lo', 'up'], netns);
  await sh('sysctl', ['-qw', 'net.ipv4.conf.all.arp_ignore=1', 'net.ipv4.conf.all.arp_announce=2'], netns);
  const underlayBatch = join(mesh.dir, 'bird-links-underlay.batch');
  const birdBatch = join(mesh.dir, 'bird-links.batch');
  await writeFile(
    underlayBatch,
    nodes.map((node) => `link add b${node.link.slice(1)} type veth peer name ${node.link} netns ${netns}\nlink set b${node.link.slice(1)} master br0 up`).join('\n') + '\n',
  );
  await writeFile(birdBatch, nodes.map((node) => `address add ${node.address}/16 dev ${node.link}\nlink set ${node.link} up`).join('\n') + '\n');
  await runner.run({ command: 'ip', args: ['-batch', underlayBatch], netns: underlay, timeoutMs: 120_000 });
  await runner.run({ command: 'ip', args: ['-batch', birdBatch], netns, timeoutMs: 120_000 });
  return netns;
}

/**
 * BIRD's protocols for the simulated nodes: one static protocol with every pod CIDR (present or not, so that adding a
 * node only adds its bgp protocol and `configure` restarts nothing else) and one bgp protocol per present node, from
 * its own address and with its own router id, exporting only its pod CIDR with itself as next hop.
 */
function birdNodesConfig(all: readonly SimNode[], present: readonly SimNode[], agent: MeshNode): string {
  const lines = ['protocol static sim_cidrs {', '  ipv4;', ...all.map((node) => `  route ${node.podCidr} blackhole;`), '}'];
  for (const node of present) {
    lines.push(
      `protocol bgp ${node.protocol} {`,
      `  router id ${node.address};`,
      // iBGP is multihop in BIRD unless said otherwise, and a multihop session cannot name its interface.
      '  direct;',
      `  interface "${node.link}";`,
      `  local ${node.address} as ${CLUSTER_ASN};`,
      `  neighbor ${agent.address} as ${CLUSTER_ASN};`,
      '  connect delay time 1;',
      '  connect retry time 2;',
      '  error wait time 1, 10;',
      // NODES_BIRD_PASSIVE=1: BIRD only answers, so the agent's gobgpd sees no connection from a node it has not
      // configured yet (the cost of those, isolated; a real cluster's other nodes do dial).
      ...(BIRD_PASSIVE ? ['  passive on;'] : []),
      `  ipv4 { import none; export where net = ${node.podCidr}; next hop self; };`,
      '}',
    );
  }
  return lines.join('\n');
}

/** The agent's gobgpd seen from beside the plugin: when each peer last reached ESTABLISHED (a peer-only watch). */
function watchPeers(socket: string) {
  const client = new (loadGobgpApi())(`unix://${socket}`, grpc.credentials.createInsecure()) as unknown as Record<string, (...args: unknown[]) => unknown> & grpc.Client;
  const establishedAt = new Map<string, number>();
  type PeerEvent = { peer?: { peer?: { state?: { sessionState?: string; neighborAddress?: string }; conf?: { neighborAddress?: string } } } };
  const stream = (client.watchEvent as (request: unknown) => grpc.ClientReadableStream<PeerEvent>).call(client, { peer: {} });
  stream.on('data', (event: PeerEvent) => {
    const peer = event.peer?.peer;
    const address = peer?.state?.neighborAddress || peer?.conf?.neighborAddress;
    if (address && peer?.state?.sessionState === 'ESTABLISHED') establishedAt.set(address, performance.now());
  });
  stream.on('error', () => undefined);
  return {
    establishedAt,
    close() {
      stream.cancel();
      client.close();
    },
  };
}

interface SizeResult {
  nodes: number;
  convergeEstablishedMs: number;
  convergeKernelMs: number;
  join: { establishedMs: number[]; kernelMs: number[] };
  leave: { kernelMs: number[]; peerGoneMs: number[] };
  rss: { gobgpd?: number; bird?: number; bench: number };
  /** gobgpd's API at this size, medians: AddPeer and DeletePeer of a peer that never answers, ListPeer. */
  gobgpApi: { addPeerMs: number; deletePeerMs: number; listPeersMs: number };
  /** The plugin's syncs during the join/leave rounds, mean: the iBGP mesh stage and the whole sync. */
  syncs: { internalPeersMs: number; routingMs: number };
}

/** The running size's cleanup, for a SIGINT or SIGTERM in the middle of it (namespaces, BIRD, gobgpd). */
let activeCleanup: (() => Promise<void>) | undefined;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    console.error(`${signal}: cleaning up`);
    void (activeCleanup?.() ?? Promise.resolve()).finally(() => process.exit(130));
  });
}

/** A histogram's sum (seconds) and count, read in-process. */
async function histogram(agent: RoutingAgent, name: string): Promise<{ sum: number; count: number }> {
  const values = ((await agent.metrics.registry.getSingleMetric(name)?.get())?.values ?? []) as { metricName?: string; value: number }[];
  return { sum: values.find((v) => v.metricName?.endsWith('_sum'))?.value ?? 0, count: values.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0 };
}
const INTERNAL_PEERS_SYNC = 'kube_router_controller_bgp_internal_peers_sync_time';
const ROUTING_SYNC = 'kube_router_controller_routes_sync_time';

async function runSize(size: number): Promise<SizeResult> {
  const members = Array.from({ length: size - 1 }, (_, j) => simNode(j));
  const joiners = Array.from({ length: ROUNDS }, (_, r) => simNode(size - 1 + r));
  const all = [...members, ...joiners];
  let mesh: Mesh | undefined;
  let server: ApiServer | undefined;
  let bird: BgpRouter | undefined;
  let agent: RoutingAgent | undefined;
  let peers: ReturnType<typeof watchPeers> | undefined;
  let api: GobgpClient | undefined;
  const extraNetns: string[] = [];
  let cleaning: Promise<void> | undefined;
  const cleanup = () =>
    (cleaning ??= (async () => {
      peers?.close();
      api?.close();
      await agent?.stop().catch(() => undefined);
      await bird?.stop();
      for (const netns of extraNetns) await deleteNetns(netns);
      await server?.close();
      await mesh?.teardown();
    })());
  activeCleanup = cleanup;
  try {
    mesh = await createMesh(1);
    const node = mesh.nodes[0]!;
    // The agent's link takes the whole 10.77.0.0/16: BIRD's 300 addresses are on it, so learned next hops are direct.
    await sh('ip', ['addr', 'del', `${node.address}/24`, 'dev', 'eth0'], node.netns);
    await sh('ip', ['addr', 'add', `${node.address}/16`, 'dev', 'eth0'], node.netns);
    const birdNetns = await birdNamespace(mesh, all, extraNetns);

    server = await startApiServer({ port: 0 });
    const birdConfig = (present: readonly SimNode[]): BgpRouterConfig => ({
      netns: birdNetns,
      routerId: BIRD_ROUTER_ID,
      asn: CLUSTER_ASN,
      neighbors: [],
      extraConfig: birdNodesConfig(all, present, node),
    });
    bird = await startBird(birdConfig(members));
    const birdRouter = bird;
    /** Rewrites BIRD's configuration file (the one startBird gave it) and reloads it: only changed protocols restart. */
    const reconfigure = async (present: readonly SimNode[]) => {
      await writeFile(join(birdRouter.dir, 'bird.conf'), renderBirdConfig(birdConfig(present)));
      const reply = await birdRouter.cli('configure');
      if (!/Reconfigur/.test(reply)) throw new Error(`birdc configure: ${reply.trim()}`);
    };

    server.create(nodeObject(node));
    for (const sim of members) server.create(nodeObject(sim));
    agent = routingAgent(mesh, node, await server.writeKubeconfig(), { ...AGENT_ROUTING_LIMITS, holdTimeSeconds: 90, clusterAsn: CLUSTER_ASN }, AGENT_ROUTE_SYNC_LIMITS);
    const synced = agent.metrics.registry.getSingleMetric('kube_router_host_routes_synced')!;
    const installed = async () => (await synced.get()).values.reduce((sum, value) => sum + value.value, 0);
    const kernelHas = async (cidr: string) => (await sh('ip', ['route', 'show', cidr, 'proto', '17'], node.netns)).trim() !== '';

    // Converge.
    const started = performance.now();
    await agent.start();
    api = new GobgpClient({ target: `unix://${agent.apiSocket}`, callTimeoutMs: 30_000 });
    const gobgp = api;
    let establishedAt = 0;
    let kernelAt = 0;
    // How the mesh comes up, every 10 s: peers configured in gobgpd, ESTABLISHED, the other nodes' pod CIDRs in
    // gobgpd's RIB, routes installed (which of them trails says where the time goes).
    const progress: string[] = [];
    let nextProgress = started + 10_000;
    let up = 0;
    let configured = 0;
    await waitFor(
      `${size - 1} peers ESTABLISHED and ${size - 1} routes installed`,
      async () => {
        if (!establishedAt) {
          const list = await gobgp.listPeers();
          configured = list.length;
          up = list.filter((peer) => peer.state?.sessionState === 'ESTABLISHED').length;
          if (up >= size - 1) establishedAt = performance.now();
        }
        if (!kernelAt && (await installed()) >= size - 1) kernelAt = performance.now();
        if ((!establishedAt || !kernelAt) && performance.now() >= nextProgress) {
          const learned = new Set((await gobgp.listRoutingPaths('AFI_IP')).filter((path) => !isLocalPath(path)).map(pathPrefix)).size;
          progress.push(
            `${((performance.now() - started) / 1000).toFixed(0)} s: ${configured} peers, ${up} up, ${learned} pod CIDRs in gobgpd's RIB, ${await installed()} routes`,
          );
          nextProgress += 10_000;
        }
        return establishedAt > 0 && kernelAt > 0;
      },
      { timeoutMs: WAIT_MS, intervalMs: 20 },
    );
    const kernelRoutes = (await sh('ip', ['route', 'show', 'proto', '17'], node.netns)).trim().split('\n').filter(Boolean).length;
    if (kernelRoutes < size - 1) throw new Error(`route-sync reported ${size - 1} routes, the kernel has ${kernelRoutes}`);
    const gobgpdPid = await pidIn(node.netns, 'gobgpd');
    const birdPid = await pidIn(birdNetns, 'bird');
    const rss = {
      gobgpd: gobgpdPid === undefined ? undefined : await rssMiB(gobgpdPid),
      bird: birdPid === undefined ? undefined : await rssMiB(birdPid),
      bench: process.memoryUsage().rss / 2 ** 20,
    };
    console.log(
      `  ${size} nodes: converged, ${size - 1} peers ESTABLISHED after ${(establishedAt - started).toFixed(0)} ms, ` +
        `${size - 1} routes in the kernel after ${(kernelAt - started).toFixed(0)} ms`,
    );
    if (progress.length > 0) console.log(`    on the way: ${progress.join('; ')}`);

    // What one mesh change costs gobgpd itself at this size: adding and deleting a peer that never answers (an
    // address nobody has), and listing every peer (each of the plugin's syncs does), medians of 5.
    const addPeerMs: number[] = [];
    const deletePeerMs: number[] = [];
    const listPeersMs: number[] = [];
    for (let i = 0; i < 5; i++) {
      const probe = { neighborAddress: `10.77.255.${i + 1}`, peerAsn: CLUSTER_ASN, remotePort: 179, holdTimeSeconds: 90, families: ['AFI_IP'] as const };
      let t = performance.now();
      await gobgp.addPeer(probe);
      addPeerMs.push(performance.now() - t);
      t = performance.now();
      await gobgp.deletePeer(probe.neighborAddress);
      deletePeerMs.push(performance.now() - t);
      t = performance.now();
      await gobgp.listPeers();
      listPeersMs.push(performance.now() - t);
    }

    peers = watchPeers(agent.apiSocket);
    const watched = peers;
    await sleep(500);
    const result: SizeResult = {
      nodes: size,
      convergeEstablishedMs: establishedAt - started,
      convergeKernelMs: kernelAt - started,
      join: { establishedMs: [], kernelMs: [] },
      leave: { kernelMs: [], peerGoneMs: [] },
      rss,
      gobgpApi: { addPeerMs: median(addPeerMs), deletePeerMs: median(deletePeerMs), listPeersMs: median(listPeersMs) },
      syncs: { internalPeersMs: 0, routingMs: 0 },
    };
    const peerSyncsBefore = await histogram(agent, INTERNAL_PEERS_SYNC);
    const routingSyncsBefore = await histogram(agent, ROUTING_SYNC);
    for (const [round, joiner] of joiners.entries()) {
      // Join: BIRD starts speaking for the node, then its Node appears.
      const before = await installed();
      const joinStart = performance.now();
      await reconfigure([...members, joiner]);
      server.create(nodeObject(joiner));
      await waitFor(`${joiner.name} ESTABLISHED and its route installed`, async () => watched.establishedAt.has(joiner.address) && (await installed()) > before, {
        timeoutMs: WAIT_MS,
        intervalMs: 2,
      });
      const joinKernel = performance.now() - joinStart;
      if (!(await kernelHas(joiner.podCidr))) throw new Error(`route-sync reported ${joiner.podCidr} installed; the kernel has no such route`);
      result.join.kernelMs.push(joinKernel);
      result.join.establishedMs.push(watched.establishedAt.get(joiner.address)! - joinStart);
      await sleep(1_500);

      // Leave: the Node goes, then BIRD stops speaking for it.
      const leaveStart = performance.now();
      server.delete('v1', 'Node', undefined, joiner.name);
      await reconfigure(members);
      let goneAt = 0;
      let peerGoneAt = 0;
      await waitFor(
        `${joiner.name}'s route and peer gone`,
        async () => {
          if (!goneAt && (await installed()) <= before) goneAt = performance.now();
          if (!peerGoneAt && !(await gobgp.listPeers()).some((peer) => peer.conf?.neighborAddress === joiner.address)) peerGoneAt = performance.now();
          return goneAt > 0 && peerGoneAt > 0;
        },
        { timeoutMs: WAIT_MS, intervalMs: 5 },
      );
      if (await kernelHas(joiner.podCidr)) throw new Error(`route-sync reported ${joiner.podCidr} removed; the kernel still has it`);
      result.leave.kernelMs.push(goneAt - leaveStart);
      result.leave.peerGoneMs.push(peerGoneAt - leaveStart);
      console.log(
        `    round ${round + 1}: join ${joinKernel.toFixed(0)} ms (ESTABLISHED ${result.join.establishedMs.at(-1)!.toFixed(0)} ms), ` +
          `leave ${(goneAt - leaveStart).toFixed(0)} ms (peer gone ${(peerGoneAt - leaveStart).toFixed(0)} ms)`,
      );
      await sleep(1_500);
    }
    const meanMs = (after: { sum: number; count: number }, before: { sum: number; count: number }) =>
      after.count > before.count ? ((after.sum - before.sum) * 1000) / (after.count - before.count) : 0;
    result.syncs = {
      internalPeersMs: meanMs(await histogram(agent, INTERNAL_PEERS_SYNC), peerSyncsBefore),
      routingMs: meanMs(await histogram(agent, ROUTING_SYNC), routingSyncsBefore),
    };
    return result;
  } catch (error) {
    // BIRD's own words about its sessions are what a failure at this size needs.
    if (bird) console.error(`BIRD's log (tail):\n${bird.log.slice(-4_000)}`);
    throw error;
  } finally {
    await cleanup();
    activeCleanup = undefined;
  }
}

let exitCode = 0;
try {
  console.log(`routing-bgp: the iBGP full mesh with one BIRD 2 speaking for the other nodes; sizes ${SIZES.join(', ')}, ${ROUNDS} join/leave rounds each`);
  const results: SizeResult[] = [];
  for (const size of SIZES) results.push(await runSize(size));
  const fmt = (n: number) => n.toFixed(0);
  const mib = (n: number | undefined) => (n === undefined ? '?' : `${n.toFixed(1)} MiB`);
  for (const r of results) {
    console.log(`${r.nodes} nodes:`);
    console.log(`  converge: every peer ESTABLISHED ${fmt(r.convergeEstablishedMs)} ms, every pod CIDR in the kernel ${fmt(r.convergeKernelMs)} ms`);
    console.log(`  join (median of ${ROUNDS}): route in the kernel ${fmt(median(r.join.kernelMs))} ms (${r.join.kernelMs.map(fmt).join(', ')}), ESTABLISHED ${fmt(median(r.join.establishedMs))} ms`);
    console.log(`  leave (median of ${ROUNDS}): route gone ${fmt(median(r.leave.kernelMs))} ms (${r.leave.kernelMs.map(fmt).join(', ')}), peer gone ${fmt(median(r.leave.peerGoneMs))} ms`);
    console.log(
      `  gobgpd API: AddPeer ${r.gobgpApi.addPeerMs.toFixed(1)} ms, DeletePeer ${r.gobgpApi.deletePeerMs.toFixed(1)} ms, ListPeer ${r.gobgpApi.listPeersMs.toFixed(1)} ms; ` +
        `plugin syncs in the rounds: mesh stage ${r.syncs.internalPeersMs.toFixed(0)} ms, whole sync ${r.syncs.routingMs.toFixed(0)} ms (means)`,
    );
    console.log(`  RSS: agent's gobgpd ${mib(r.rss.gobgpd)}, BIRD ${mib(r.rss.bird)}, this process (the plugins run in it) ${mib(r.rss.bench)}`);
  }
  const small = results[0]!;
  const large = results.at(-1)!;
  const joinRatio = median(large.join.kernelMs) / median(small.join.kernelMs);
  const leaveRatio = median(large.leave.kernelMs) / median(small.leave.kernelMs);
  if (results.length > 1) {
    console.log(`goal: join and leave at ${large.nodes} within 1.2x of ${small.nodes}: join ${joinRatio.toFixed(2)}x, leave ${leaveRatio.toFixed(2)}x`);
  }
  const figures = results.flatMap((r) => [
    { name: `nodes ${r.nodes}: converge (peers up, routes in kernel)`, value: r.convergeKernelMs, unit: 'ms', better: 'lower' as const },
    { name: `nodes ${r.nodes}: join -> route in kernel`, value: median(r.join.kernelMs), unit: 'ms', better: 'lower' as const },
    { name: `nodes ${r.nodes}: leave -> route gone`, value: median(r.leave.kernelMs), unit: 'ms', better: 'lower' as const },
  ]);
  if (results.length > 1) {
    figures.push(
      { name: `nodes: join ${large.nodes} / ${small.nodes}`, value: joinRatio, unit: 'x', better: 'lower' },
      { name: `nodes: leave ${large.nodes} / ${small.nodes}`, value: leaveRatio, unit: 'x', better: 'lower' },
    );
  }
  if (large.rss.gobgpd !== undefined) figures.push({ name: `nodes ${large.nodes}: gobgpd RSS`, value: large.rss.gobgpd, unit: 'MiB', better: 'lower' });
  figures.push({ name: `nodes ${large.nodes}: agent (bench process) RSS`, value: large.rss.bench, unit: 'MiB', better: 'lower' });
  reportBench({ plugin: 'routing-bgp', figures });
} catch (error) {
  console.error(error);
  exitCode = 1;
}
process.exit(exitCode);
