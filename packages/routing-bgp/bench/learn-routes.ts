// 5,000 pod CIDRs learned from a peer: a plain gobgpd in node-2's namespace holds them before the session comes up,
// so they arrive in one burst of UPDATEs. Measured in this one run, each from the session reaching ESTABLISHED:
//
//   1. gobgpd alone (no agent, nothing watching): until its RIB holds every path (GetTable polled), the part no agent
//      can make faster;
//   2. the agent (routing-bgp + route-sync, as the agent assembles them): until its gobgpd's RIB holds every path,
//      until routing-bgp has handed every route to route-sync, until route-sync has installed every one;
//   3. a bare `ip -batch` of the same routes in the same namespace (the median of five, two before the agent and three
//      after), for the ratios.
//
// Needs root, iproute2 and gobgpd. Prints the split and the ratios; never passes or fails on times.
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import * as grpc from '@grpc/grpc-js';
import type { InjectedRoute } from '@kube-router/controller';
import { startApiServer, waitFor } from '@kube-router/testkit';
import { reportBench } from '@kube-router/testkit/bench';
import { GobgpClient, loadGobgpApi } from '../src/gobgp-api.js';
import { decodeWatchEvent } from '../src/path-decoder.js';
import { podCidrPath } from '../src/paths.js';
import { createMesh, nodeObject, routingAgent, sh, type MeshNode } from '../src/testing/mesh.js';
import { AGENT_ROUTE_SYNC_LIMITS, AGENT_ROUTING_LIMITS, median, sleep } from './shared.js';

const ROUTES = Number(process.env.ROUTES ?? 5_000);
const cidrs = Array.from({ length: ROUTES }, (_, i) => `10.${100 + Math.floor(i / 256)}.${i % 256}.0/24`);
const countKernelRoutes = async (netns: string) => Number((await sh('sh', ['-c', 'ip route show proto 17 | wc -l'], netns)).trim());

/**
 * What the bench asks a gobgpd beside the agent's client: when a session reached ESTABLISHED (a watch of peer events
 * only, which costs gobgpd nothing per path) and how many destinations its global RIB holds.
 */
function observeGobgpd(socket: string) {
  const client = new (loadGobgpApi())(`unix://${socket}`, grpc.credentials.createInsecure()) as unknown as Record<string, (...args: unknown[]) => unknown> & grpc.Client;
  let establishedAt = 0;
  type PeerEvent = { peer?: { peer?: { state?: { sessionState?: string } } } };
  const peers = (client.watchEvent as (request: unknown) => grpc.ClientReadableStream<PeerEvent>).call(client, { peer: {} });
  peers.on('data', (event: PeerEvent) => {
    if (!establishedAt && event.peer?.peer?.state?.sessionState === 'ESTABLISHED') establishedAt = performance.now();
  });
  peers.on('error', () => undefined);
  const destinations = () =>
    new Promise<number>((resolve, reject) =>
      (client.getTable as (request: unknown, callback: (error: Error | null, response: { numDestination: number }) => void) => void).call(
        client,
        { tableType: 'GLOBAL', family: { afi: 'AFI_IP', safi: 'SAFI_UNICAST' } },
        (error, response) => (error ? reject(error) : resolve(Number(response.numDestination))),
      ),
    );
  return {
    established: () => establishedAt,
    /** Resolves with the moment the RIB first held `count` destinations, polled every 2 ms. */
    async ribHolds(count: number, timeoutMs = 120_000): Promise<number> {
      const started = performance.now();
      for (;;) {
        if ((await destinations()) >= count) return performance.now();
        if (performance.now() - started > timeoutMs) throw new Error(`gobgpd at ${socket} never held ${count} destinations`);
        await sleep(2);
      }
    },
    close() {
      peers.cancel();
      client.close();
    },
  };
}

const spawnGobgpd = (node: MeshNode, socket: string) =>
  spawn('ip', ['netns', 'exec', node.netns, 'gobgpd', `--api-hosts=unix://${socket}`, '--pprof-disable'], { stdio: 'ignore' });

const mesh = await createMesh(2);
const [n1, n2] = mesh.nodes as [MeshNode, MeshNode];
const server = await startApiServer({ port: 0 });
const injectorSocket = `${mesh.dir}/injector.sock`;
const injector = spawnGobgpd(n2, injectorSocket);
const injectorApi = new GobgpClient({ target: `unix://${injectorSocket}`, callTimeoutMs: 30_000 });
const peerN1 = { neighborAddress: n1.address, peerAsn: 64512, remotePort: 179, holdTimeSeconds: 9, families: ['AFI_IP'] as const };
const bare: number[] = [];
let exitCode = 0;
try {
  await waitFor('injector gobgpd', () => injectorApi.waitReady(500).then(() => true), 10_000);
  await injectorApi.startBgp({ asn: 64512, routerId: n2.address, listenPort: 179 });
  await injectorApi.addPathsInBulk(cidrs.map((cidr) => podCidrPath(cidr, n2.address)));

  // 1. gobgpd alone: what receiving and selecting 5,000 paths costs gobgpd itself.
  const aloneSocket = `${mesh.dir}/alone.sock`;
  const alone = spawnGobgpd(n1, aloneSocket);
  const aloneApi = new GobgpClient({ target: `unix://${aloneSocket}` });
  let aloneMs: number;
  try {
    await waitFor('lone gobgpd', () => aloneApi.waitReady(500).then(() => true), 10_000);
    await aloneApi.startBgp({ asn: 64512, routerId: n1.address, listenPort: 179 });
    await aloneApi.addPeer({ neighborAddress: n2.address, peerAsn: 64512, remotePort: 179, holdTimeSeconds: 9, families: ['AFI_IP'] });
    const observed = observeGobgpd(aloneSocket);
    await sleep(200);
    await injectorApi.addPeer(peerN1);
    const allAt = await observed.ribHolds(ROUTES);
    aloneMs = allAt - observed.established();
    observed.close();
    await injectorApi.deletePeer(n1.address);
  } finally {
    aloneApi.close();
    alone.kill('SIGKILL');
  }
  // 3. The bare baseline: the same routes with one `ip -batch` in the same namespace. Two rounds here and three after
  // the agent, so that a machine whose load changes during the run weighs on both sides.
  await sleep(500);
  const batchFile = `${mesh.dir}/routes.batch`;
  await writeFile(batchFile, `${cidrs.map((c) => `route replace ${c} via ${n2.address} proto 17`).join('\n')}\n`);
  const bareRound = async () => {
    await sh('ip', ['route', 'flush', 'proto', '17'], n1.netns);
    const started = performance.now();
    await sh('ip', ['-batch', batchFile], n1.netns);
    bare.push(performance.now() - started);
    if ((await countKernelRoutes(n1.netns)) < ROUTES) throw new Error('bare ip -batch did not install every route');
    await sh('ip', ['route', 'flush', 'proto', '17'], n1.netns);
  };
  for (let round = 0; round < 2; round++) await bareRound();

  // 2. The agent.
  server.create(nodeObject(n1));
  server.create(nodeObject(n2));
  // Both controllers with the agent's own sync limits (at most one sync a second each), not the tests' fast ones.
  const agent = routingAgent(mesh, n1, await server.writeKubeconfig(), AGENT_ROUTING_LIMITS, AGENT_ROUTE_SYNC_LIMITS);
  // Every hand-over to route-sync, timed where it happens (polling wantedRoutes() would load the loop measured).
  let handedAt = 0;
  let handOvers = 0;
  const setRoutes = agent.routes.setRoutes.bind(agent.routes);
  agent.routes.setRoutes = (owner: string, routes: readonly InjectedRoute[]) => {
    handOvers++;
    if (!handedAt && routes.length >= ROUTES) handedAt = performance.now();
    setRoutes(owner, routes);
  };
  await agent.start();
  await waitFor('node-1 gobgpd configured with its peer', async () => {
    const api = new GobgpClient({ target: `unix://${agent.apiSocket}` });
    try {
      return (await api.listPeers()).some((peer) => peer.conf?.neighborAddress === n2.address);
    } finally {
      api.close();
    }
  }, 20_000);
  const observed = observeGobgpd(agent.apiSocket);
  const syncTime = agent.metrics.registry.getSingleMetric('kube_router_host_routes_sync_time')!;
  const syncSeconds = async () => {
    // A histogram's values carry their series' name (`_sum`, `_count`, `_bucket`).
    const values = (await syncTime.get()).values as { metricName?: string; value: number }[];
    return { sum: values.find((v) => v.metricName?.endsWith('_sum'))?.value ?? 0, count: values.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0 };
  };
  await sleep(200);
  const syncsBefore = await syncSeconds();
  await injectorApi.addPeer(peerN1);
  const ribAt = await observed.ribHolds(ROUTES);
  await waitFor('every route handed over', () => handedAt > 0, { timeoutMs: 120_000, intervalMs: 5 });
  // route-sync's gauge of installed routes, set when its `ip -batch` returned: read in-process, every 2 ms.
  const synced = agent.metrics.registry.getSingleMetric('kube_router_host_routes_synced')!;
  await waitFor('every route in the kernel', async () => ((await synced.get()).values[0]?.value ?? 0) >= ROUTES, { timeoutMs: 120_000, intervalMs: 2 });
  const kernelAt = performance.now();
  const syncsAfter = await syncSeconds();
  const routeSyncMs = (syncsAfter.sum - syncsBefore.sum) * 1000;
  const routeSyncs = syncsAfter.count - syncsBefore.count;
  const establishedAt = observed.established();
  observed.close();
  await agent.stop();
  if ((await countKernelRoutes(n1.netns)) < ROUTES) throw new Error('route-sync reported routes the kernel does not have');

  // 3. The bare baseline: three more rounds after the agent's (two ran before it), the median of the five.
  for (let round = 0; round < 3; round++) await bareRound();
  const bareMs = median(bare);

  // 4. Reading the events: gobgpd streams a burst as one WatchEvent message per path. The agent's decoder
  // (path-decoder.ts) against proto-loader's, which the agent used before, on the same 5,000 messages (medians of 3).
  const watchMethod = loadGobgpApi().service.WatchEvent!;
  const messages = cidrs.map((cidr) =>
    watchMethod.responseSerialize({ table: { paths: [{ ...podCidrPath(cidr, n2.address), neighborIp: n2.address, sourceId: n2.address, best: true }] } }),
  );
  const decodeTime = (decode: (buf: Buffer) => unknown) =>
    median(
      [0, 1, 2].map(() => {
        const started = performance.now();
        for (const message of messages) decode(message);
        return performance.now() - started;
      }),
    );
  const protoLoaderMs = decodeTime((buf) => watchMethod.responseDeserialize(buf));
  const leanMs = decodeTime(decodeWatchEvent);

  const toRib = ribAt - establishedAt;
  const toHanded = handedAt - establishedAt;
  const toKernel = kernelAt - establishedAt;
  const fmt = (n: number) => n.toFixed(0);
  const ratio = (n: number) => `${(n / bareMs).toFixed(2)}x`;
  console.log(`routing-bgp: ${ROUTES} pod CIDRs learned from one iBGP peer (gobgpd 3.10), node-1 in its own netns; from ESTABLISHED:`);
  console.log(`  gobgpd alone, every path in its RIB:          ${fmt(aloneMs)} ms  (${ratio(aloneMs)} bare)`);
  console.log(`  agent: every path in gobgpd's RIB:            ${fmt(toRib)} ms  (${ratio(toRib)})`);
  console.log(`  agent: every route handed to route-sync:      ${fmt(toHanded)} ms  (${ratio(toHanded)}; ${handOvers} hand-overs)`);
  console.log(`  agent: every route in the kernel:             ${fmt(toKernel)} ms  (${ratio(toKernel)}; ${fmt(ROUTES / (toKernel / 1000))} routes/s)`);
  console.log(`    of which after the hand-over:               ${fmt(kernelAt - handedAt)} ms  (route-sync: ${routeSyncs} syncs, ${fmt(routeSyncMs)} ms in them)`);
  console.log(`  bare ip -batch of the same routes (median of 5): ${fmt(bareMs)} ms  (${bare.map(fmt).join(', ')})`);
  console.log(`  decoding ${ROUTES} watch events: ${leanMs.toFixed(1)} ms (proto-loader: ${protoLoaderMs.toFixed(1)} ms)`);
  console.log(`  goal: peer -> kernel within 3x the bare ip -batch: ${ratio(toKernel)}`);
  reportBench({
    plugin: 'routing-bgp',
    figures: [
      { name: 'learn: peer up -> kernel / bare ip -batch', value: toKernel / bareMs, unit: 'x', better: 'lower' },
      { name: 'learn: peer up -> handed to route-sync / bare ip -batch', value: toHanded / bareMs, unit: 'x', better: 'lower' },
      { name: 'learn: gobgpd alone, peer up -> RIB / bare ip -batch', value: aloneMs / bareMs, unit: 'x', better: 'lower' },
      { name: 'learn: peer up -> kernel', value: toKernel, unit: 'ms', better: 'lower' },
      { name: 'learn: gobgpd alone, peer up -> RIB', value: aloneMs, unit: 'ms', better: 'lower' },
      { name: 'learn: decode watch events / proto-loader', value: leanMs / protoLoaderMs, unit: 'x', better: 'lower' },
    ],
  });
} catch (error) {
  console.error(error);
  exitCode = 1;
} finally {
  injectorApi.close();
  injector.kill('SIGKILL');
  await server.close();
  await mesh.teardown();
}
process.exit(exitCode);
