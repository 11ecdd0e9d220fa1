// 1,000 LoadBalancer addresses advertised to a BIRD peer: how long from the Services' creation until BIRD holds every
// /32, against gobgp's own tools injecting the same paths into a plain gobgpd peered with the same BIRD, in one run.
//
// One node of the mesh runs the routing-bgp controller with --advertise-loadbalancer-ip and BIRD as its external peer
// (--peer-router-ips); beside it on the underlay a plain gobgpd (the injector) peers with the same BIRD. Per round:
// - controller: the Services are created in the embedded API server, then their status.loadBalancer.ingress written
//   (as lballoc does); the clock runs from the last write to the arrival of the last path in BIRD's table (BIRD's own
//   route timestamps, to the µs);
// - gobgp API: the same paths added to the injector one AddPath call after another (what `gobgp global rib add` does,
//   without a process per path), from the first call to the last path's arrival in BIRD;
// then every path is withdrawn again (Services deleted, paths deleted) and the withdrawal timed by polling.
// `gobgp global rib add`, one process per path, is timed in one round more (it is slow: it is the CLI's ratio).
// Medians of ROUNDS rounds (default 5). Namespaces: `bl` + 4 random letters.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { startApiServer, waitFor } from '@kube-router/testkit';
import { reportBench } from '@kube-router/testkit/bench';
import { bgpRoutersSkipReason, startBird, type BgpRouter } from '@kube-router/testkit/bgp-routers';
import { GobgpClient } from '../src/gobgp-api.js';
import { pathPrefix, podCidrPath } from '../src/paths.js';
import { createMesh, nodeObject, routingAgent, sh } from '../src/testing/mesh.js';

const VIPS = Number(process.env.VIPS ?? 1_000);
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const CLUSTER_ASN = 64_512;
const INJECTOR_ASN = 64_513;
const BIRD_ASN = 65_000;
const BIRD_ADDRESS = '10.77.0.150';
const INJECTOR_ADDRESS = '10.77.0.151';
const NAMESPACE = 'bench';

const skip = bgpRoutersSkipReason('bird');
if (skip) {
  console.log(`routing-bgp advertise-vips: skipped (${skip})`);
  process.exit(0);
}

/** 198.18.0.0/15, the benchmarking range: 198.18.0.0, 198.18.0.1, ... */
const vips = Array.from({ length: VIPS }, (_, i) => `198.18.${Math.floor(i / 256)}.${i % 256}`);
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const prefix = `bl${Math.random().toString(36).slice(2, 6)}`;
const mesh = await createMesh(1, { prefix });
const node = mesh.nodes[0]!;
const server = await startApiServer({ port: 0 });
const extraNetns: string[] = [];
let bird: BgpRouter | undefined;
let injector: ReturnType<typeof spawn> | undefined;
let injectorApi: GobgpClient | undefined;
let nodeApi: GobgpClient | undefined;
let agent: ReturnType<typeof routingAgent> | undefined;
let exitCode = 0;

/** A namespace on the mesh's underlay with one address. */
async function onUnderlay(name: string, address: string): Promise<string> {
  const netns = `${prefix}-${name}`;
  await sh('ip', ['netns', 'add', netns]);
  extraNetns.push(netns);
  await sh('ip', ['link', 'set', 'lo', 'up'], netns);
  await sh('ip', ['link', 'add', 'eth0', 'netns', netns, 'type', 'veth', 'peer', 'name', `${prefix}${name}`, 'netns', `${prefix}-ul`]);
  await sh('ip', ['link', 'set', `${prefix}${name}`, 'master', 'br0', 'up'], `${prefix}-ul`);
  await sh('ip', ['addr', 'add', `${address}/24`, 'dev', 'eth0'], netns);
  await sh('ip', ['link', 'set', 'eth0', 'up'], netns);
  return netns;
}

/** How many VIP paths BIRD holds from a neighbor (its pod CIDR left out): a `count` query, cheap to poll. */
async function countFrom(router: BgpRouter, neighbor: string): Promise<number> {
  const protocol = `peer${router.config.neighbors.findIndex((n) => n.address === neighbor) + 1}`;
  const output = await router.cli(`show route protocol ${protocol} where net ~ [ 198.18.0.0/15+ ] count`);
  return Number(/(\d+) of \d+ routes/.exec(output)?.[1] ?? 0);
}

/** Waits until BIRD has every VIP from the neighbor; returns when the last one arrived (BIRD's clock, ms since epoch). */
async function lastArrival(router: BgpRouter, neighbor: string): Promise<number> {
  await waitFor(`BIRD to hold ${VIPS} paths from ${neighbor}`, async () => (await countFrom(router, neighbor)) >= VIPS, 120_000);
  const wanted = new Set(vips.map((vip) => `${vip}/32`));
  const arrivals = (await router.routes()).filter((r) => r.from === neighbor && wanted.has(r.prefix)).map((r) => r.receivedAt ?? 0);
  if (arrivals.length < VIPS) throw new Error(`BIRD lists ${arrivals.length} of ${VIPS} paths from ${neighbor}`);
  return Math.max(...arrivals);
}

async function withdrawn(router: BgpRouter, neighbor: string): Promise<number> {
  const started = Date.now();
  await waitFor(`BIRD to lose every path from ${neighbor}`, async () => (await countFrom(router, neighbor)) === 0, 120_000);
  return Date.now() - started;
}

const service = (vip: string, index: number) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { namespace: NAMESPACE, name: `vip-${index}` },
  spec: {
    type: 'LoadBalancer',
    clusterIP: clusterIp(index),
    clusterIPs: [clusterIp(index)],
    ports: [{ port: 80, protocol: 'TCP', targetPort: 8080 }],
  },
});
const clusterIp = (index: number) => `10.96.${Math.floor((index + 1) / 256)}.${(index + 1) % 256}`;

/** A LoadBalancer Service as an allocator leaves it: created, then its ingress address written to its status. */
function createLoadBalancer(vip: string, index: number): void {
  const created = server.create(service(vip, index));
  server.updateStatus({ ...created, status: { loadBalancer: { ingress: [{ ip: vip }] } } });
}

try {
  const birdNetns = await onUnderlay('b', BIRD_ADDRESS);
  const injectorNetns = await onUnderlay('i', INJECTOR_ADDRESS);
  bird = await startBird({
    netns: birdNetns,
    routerId: BIRD_ADDRESS,
    asn: BIRD_ASN,
    neighbors: [
      { address: node.address, asn: CLUSTER_ASN, export: 'none', holdTimeSeconds: 9 },
      { address: INJECTOR_ADDRESS, asn: INJECTOR_ASN, export: 'none', holdTimeSeconds: 9 },
    ],
  });

  const injectorSocket = join(mesh.dir, 'injector.sock');
  injector = spawn('ip', ['netns', 'exec', injectorNetns, 'gobgpd', `--api-hosts=unix://${injectorSocket}`, '--pprof-disable'], { stdio: 'ignore' });
  injectorApi = new GobgpClient({ target: `unix://${injectorSocket}`, callTimeoutMs: 30_000 });
  await waitFor('injector gobgpd', () => injectorApi!.waitReady(500).then(() => true), 10_000);
  await injectorApi.startBgp({ asn: INJECTOR_ASN, routerId: INJECTOR_ADDRESS, listenPort: 179 });
  await injectorApi.addPeer({ neighborAddress: BIRD_ADDRESS, peerAsn: BIRD_ASN, remotePort: 179, holdTimeSeconds: 9, families: ['AFI_IP'] });

  server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } });
  server.create(nodeObject(node));
  agent = routingAgent(mesh, node, await server.writeKubeconfig(), {
    bgpPort: 179,
    syncPeriodMs: 60_000,
    advertiseLoadBalancerIp: true,
    peerRouters: [{ address: BIRD_ADDRESS, asn: BIRD_ASN }],
  });
  await agent.start();
  await bird.waitForSession(node.address);
  await bird.waitForSession(INJECTOR_ADDRESS);

  // Where the controller's time goes: until its own gobgpd holds every path (polled), and from there to BIRD.
  nodeApi = new GobgpClient({ target: `unix://${agent.apiSocket}`, callTimeoutMs: 30_000 });
  const wantedPrefixes = new Set(vips.map((vip) => `${vip}/32`));
  const inNodeRib = async (since: number) => {
    await waitFor('the node’s gobgpd to hold every VIP', async () => {
      const local = (await nodeApi!.listGlobalPaths('AFI_IP')).filter((p) => !p.isWithdraw && wantedPrefixes.has(pathPrefix(p) ?? ''));
      return local.length >= VIPS;
    }, 120_000);
    return Date.now() - since;
  };

  const paths = vips.map((vip) => podCidrPath(`${vip}/32`, INJECTOR_ADDRESS));
  const controllerMs: number[] = [];
  const nodeRibMs: number[] = [];
  const writeMs: number[] = [];
  const withWritesMs: number[] = [];
  const apiMs: number[] = [];
  const controllerWithdrawMs: number[] = [];
  const apiWithdrawMs: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    // The embedded API server runs in this process and its writes are synchronous: nothing else runs until the last
    // Service is written, so the controller's clock starts there (the writes are timed on their own).
    const writing = Date.now();
    vips.forEach(createLoadBalancer);
    const written = Date.now();
    writeMs.push(written - writing);
    const [ribMs, arrival] = await Promise.all([inNodeRib(written), lastArrival(bird, node.address)]);
    nodeRibMs.push(ribMs);
    controllerMs.push(arrival - written);
    withWritesMs.push(arrival - writing);
    for (let index = 0; index < VIPS; index++) server.delete('v1', 'Service', NAMESPACE, `vip-${index}`);
    controllerWithdrawMs.push(await withdrawn(bird, node.address));

    const injected = Date.now();
    for (const path of paths) await injectorApi.addPath(path);
    apiMs.push((await lastArrival(bird, INJECTOR_ADDRESS)) - injected);
    const deleting = Date.now();
    for (const path of paths) await injectorApi.deletePath(path);
    await withdrawn(bird, INJECTOR_ADDRESS);
    apiWithdrawMs.push(Date.now() - deleting);
    console.log(`round ${round + 1}: controller ${controllerMs.at(-1)} ms (its gobgpd ${nodeRibMs.at(-1)} ms), gobgp API ${apiMs.at(-1)} ms`);
  }

  // The CLI, as an operator would type it: one `gobgp global rib add` per path, against the injector's socket.
  const cliStarted = Date.now();
  for (const vip of vips) await sh('gobgp', [`--target=unix://${injectorSocket}`, 'global', 'rib', 'add', '-a', 'ipv4', `${vip}/32`]);
  const cliMs = (await lastArrival(bird, INJECTOR_ADDRESS)) - cliStarted;

  const controller = median(controllerMs);
  const api = median(apiMs);
  const fmt = (n: number) => n.toFixed(0);
  console.log(`routing-bgp: ${VIPS} LoadBalancer addresses advertised to BIRD 2 (eBGP), medians of ${ROUNDS} rounds`);
  console.log(`  embedded API server: writing the Services and their status: ${fmt(median(writeMs))} ms (not counted below)`);
  console.log(`  controller: last Service written -> BIRD has every /32: ${fmt(controller)} ms (${fmt(VIPS / (controller / 1000))} paths/s)`);
  console.log(`    of which until the node's gobgpd holds every path:  ${fmt(median(nodeRibMs))} ms (polled every 100 ms)`);
  console.log(`  gobgp API: first AddPath -> BIRD has every /32:       ${fmt(api)} ms`);
  console.log(`  gobgp CLI: first \`gobgp global rib add\` -> BIRD has every /32: ${fmt(cliMs)} ms (one round)`);
  console.log(`  ratio controller / gobgp API: ${(controller / api).toFixed(2)}x; controller / gobgp CLI: ${(controller / cliMs).toFixed(2)}x`);
  console.log(`  withdrawal: Services deleted -> BIRD has none: ${fmt(median(controllerWithdrawMs))} ms; gobgp API DeletePath: ${fmt(median(apiWithdrawMs))} ms`);
  reportBench({
    plugin: 'routing-bgp',
    figures: [
      { name: `advertise ${VIPS} VIPs to BIRD: controller / gobgp API`, value: controller / api, unit: 'x', better: 'lower' },
      { name: `advertise ${VIPS} VIPs to BIRD: controller / gobgp CLI`, value: controller / cliMs, unit: 'x', better: 'lower' },
      { name: `advertise ${VIPS} VIPs to BIRD: controller`, value: controller, unit: 'ms', better: 'lower' },
      { name: `advertise ${VIPS} VIPs to BIRD: API server writes + controller`, value: median(withWritesMs), unit: 'ms', better: 'lower' },
      { name: `withdraw ${VIPS} VIPs from BIRD: controller`, value: median(controllerWithdrawMs), unit: 'ms', better: 'lower' },
    ],
  });
} catch (error) {
  console.error(error);
  exitCode = 1;
} finally {
  nodeApi?.close();
  await agent?.stop().catch(() => undefined);
  injectorApi?.close();
  injector?.kill('SIGKILL');
  await bird?.stop();
  for (const netns of extraNetns) await sh('ip', ['netns', 'delete', netns]).catch(() => undefined);
  await server.close();
  await mesh.teardown();
}
process.exit(exitCode);
