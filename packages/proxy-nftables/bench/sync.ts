// The nftables proxy at scale on the host kernel, in network namespaces `krt-bench-<run>-*` (needs root, nft, ip):
//   npm run bench -w @kube-router/proxy-nftables        (BENCH_SERVICES, BENCH_ENDPOINTS override the 10,000 x 10)
// Measured in one run (issue 32's figures):
// - the full sync of BENCH_SERVICES x BENCH_ENDPOINTS against a bare `nft -f` of the table it wrote (`nft list table`
//   dumped to a file, loaded into a fresh namespace);
// - one endpoint replaced, from the EndpointSlice event (the sources' onChange handler called, as an informer calls it)
//   through the real SyncScheduler to the end of the sync whose `nft -f` committed it, at BENCH_SERVICES Services and at
//   100 (rounds interleaved so that the machine's load moves both alike), each round checked in the kernel afterwards;
// - the periodic sync (reads the table back, writes it whole);
// - a restart at BENCH_SERVICES x 2 endpoints on a served node: a new controller adopting the table its predecessor
//   left (with a sample of Services probed meanwhile) until the kernel holds every Service, then every Service
//   answering a real TCP connection from a client namespace; and the same from an empty kernel (the table gone);
// - the bench process's peak RSS.
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { ServiceRegistry, SyncScheduler } from '@kube-router/controller';
import type { SyncOutcome } from '@kube-router/healthcheck';
import { HealthRegistry } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import { waitFor } from '@kube-router/testkit';
import { reportBench } from '@kube-router/testkit/bench';
import type { BenchFigure } from '@kube-router/testkit/bench';
import pino from 'pino';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createProxyNftablesController } from '../src/controller.js';
import type { ProxySources } from '../src/controller.js';
import { hashedName, PREFIX, servicePortBase } from '../src/names.js';
import { proxyNftablesOptions } from '../src/options.js';
import { BenchWorld, ENDPOINT_RANGE, NODE_IP } from './world.js';

const SERVICES = Number(process.env.BENCH_SERVICES ?? 10_000);
const ENDPOINTS = Number(process.env.BENCH_ENDPOINTS ?? 10);
const SMALL = 100;
const ROUNDS = 7;
const RESTART_ENDPOINTS = 2;
const NODE = 'bench-node';
const TABLE = 'ip kube-router-proxy';

const clusterIp = (i: number) => `10.96.${Math.floor(i / 250)}.${(i % 250) + 1}`;
/** Distinct addresses in ENDPOINT_RANGE (10.100.0.0/14) for up to 250,000 endpoints. */
const endpointIp = (n: number) => `10.${100 + Math.floor(n / 62_500)}.${Math.floor(n / 250) % 250}.${(n % 250) + 1}`;
const median = (values: readonly number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)] ?? Number.NaN;
const ms = (value: number) => `${Math.round(value).toLocaleString('en')} ms`;
const MiB = () => process.resourceUsage().maxRSS / 1024;

function sliceOf(name: string, ips: readonly string[]): V1EndpointSlice {
  return {
    addressType: 'IPv4',
    metadata: { namespace: 'bench', name: `${name}-a`, labels: { 'kubernetes.io/service-name': name } },
    ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
    endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true }, nodeName: NODE })),
  };
}
const node: V1Node = { metadata: { name: NODE }, spec: { podCIDRs: [ENDPOINT_RANGE] }, status: { addresses: [{ type: 'InternalIP', address: NODE_IP }] } };

/** A cluster of NodePort Services, each with one EndpointSlice; `fire` is an informer's change notification. */
function cluster(count: number, endpoints: number) {
  const services: V1Service[] = [];
  const slices = new Map<string, V1EndpointSlice[]>();
  const endpointsOf = (i: number) => Array.from({ length: endpoints }, (_, j) => endpointIp(i * endpoints + j));
  for (let i = 0; i < count; i++) {
    const name = `svc-${i}`;
    // NodePorts wrap after 30,000 Services: beyond that size some are duplicates, which the model reports.
    services.push({ metadata: { namespace: 'bench', name }, spec: { type: 'NodePort', clusterIP: clusterIp(i), clusterIPs: [clusterIp(i)], ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30000 + (i % 30000) }] } });
    slices.set(`bench/${name}`, [sliceOf(name, endpointsOf(i))]);
  }
  const handlers = new Set<() => void>();
  const sources: ProxySources = {
    services: () => services,
    slicesFor: (namespace, name) => slices.get(`${namespace}/${name}`) ?? [],
    node: () => node,
    hasSynced: () => true,
    onChange: (handler) => {
      handlers.add(handler);
      return () => handlers.delete(handler);
    },
    warnService: () => undefined,
  };
  const target = Math.floor(count / 2);
  return {
    sources,
    target,
    /** Replaces the first endpoint of the middle Service with 10.250.0.<round>: one EndpointSlice event. */
    replaceOne(round: number): string {
      const address = `10.250.0.${round}`;
      slices.set(`bench/svc-${target}`, [sliceOf(`svc-${target}`, [...endpointsOf(target).slice(1), address])]);
      return address;
    },
    /** Calls the change handlers as an informer does once its cache holds the change; returns when it did. */
    fire(): number {
      const at = performance.now();
      for (const handler of handlers) handler();
      return at;
    },
  };
}
type Cluster = ReturnType<typeof cluster>;

interface SyncRecord {
  readonly reason: string;
  readonly startedAt: number;
  readonly endedAt: number;
  readonly outcome: SyncOutcome;
}

function succeeded(sync: SyncRecord | undefined): SyncRecord {
  if (!sync) throw new Error('no sync has ended');
  if (!sync.outcome.ok) throw sync.outcome.error;
  return sync;
}

/** The controller as the agent runs it: started, driven by the real SyncScheduler (default minimum interval, 1 s). */
async function startProxy(world: BenchWorld, netns: string, cluster: Cluster) {
  const ctx = { nodeName: NODE, logger: pino({ level: 'silent' }), metrics: new AgentMetrics({ collectDefaultMetrics: false }), health: new HealthRegistry({ defaultGraceMs: 600_000 }), services: new ServiceRegistry() };
  const controller = createProxyNftablesController(ctx, { sources: cluster.sources, runner: world.runner }, proxyNftablesOptions.parse({ netns, commandTimeoutMs: 900_000, syncTimeoutMs: 0, syncPeriodMs: 3_600_000 }));
  const syncs: SyncRecord[] = [];
  const scheduler = new SyncScheduler(controller, {
    onSync: (reason, outcome) => {
      const endedAt = performance.now();
      syncs.push({ reason, startedAt: endedAt - outcome.durationMs, endedAt, outcome });
    },
  });
  const started = performance.now();
  await controller.start({ requestSync: (reason) => scheduler.requestSync(reason), signal: new AbortController().signal });
  scheduler.start();
  await waitFor('the initial sync', () => syncs.length > 0, { timeoutMs: 1_800_000, intervalMs: 10 });
  const initial = succeeded(syncs[0]);
  /** The first sync that began at or after `since` and has ended (the one that served an event fired then). */
  const servedSince = async (since: number) => {
    let served: SyncRecord | undefined;
    await waitFor('the sync serving the event', () => (served = syncs.find((sync) => sync.startedAt >= since)) !== undefined, { timeoutMs: 600_000, intervalMs: 1 });
    return succeeded(served);
  };
  /** Waits until no sync has run for `quietMs` (the stale-chain deletion a replaced endpoint asks for included). */
  const settle = async (quietMs = 1_500) => {
    await waitFor('the controller to go quiet', () => performance.now() - (syncs.at(-1)?.endedAt ?? 0) >= quietMs, { timeoutMs: 600_000, intervalMs: 20 });
  };
  return { controller, scheduler, syncs, initialMs: initial.endedAt - started, servedSince, settle };
}

const world = new BenchWorld();
const dumpFile = join(tmpdir(), `${world.name('dump')}.nft`);
// Interrupted (Ctrl-C, a timeout's SIGTERM): the namespaces go too.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    console.error(`${signal}: deleting the bench's namespaces`);
    void Promise.all([rm(dumpFile, { force: true }), world.tearDown()]).finally(() => process.exit(130));
  });
}
const figures: BenchFigure[] = [];
try {
  const bigNs = await world.namespace('big');
  const bareNs = await world.namespace('bare');
  const smallNs = await world.namespace('small');
  const nftIn = (netns: string, args: string, timeoutMs?: number) => world.sh(`nft ${args}`, netns, timeoutMs);

  // Full sync, then the same table as one bare `nft -f` into a fresh namespace: the floor of any nft-based proxy.
  const bigCluster = cluster(SERVICES, ENDPOINTS);
  const big = await startProxy(world, bigNs, bigCluster);
  const fullReport = big.controller.lastSync();
  const fullNftMs = fullReport?.writes.ipv4?.nftMs ?? Number.NaN;
  const rssAfterFull = MiB();
  const listed = await nftIn(bigNs, `list table ${TABLE} > ${dumpFile}`);
  const dump = await world.sh(`wc -l < ${dumpFile}; wc -c < ${dumpFile}; grep -c '^\\s*chain ' ${dumpFile}`);
  const [dumpLines, dumpBytes, dumpChains] = dump.stdout.trim().split('\n').map(Number);
  const bare = await world.runner.run({ command: 'nft', args: ['-f', dumpFile], netns: bareNs });
  await rm(dumpFile, { force: true });
  await world.drop(bareNs);
  console.log(`full sync (${SERVICES} Services x ${ENDPOINTS} endpoints, ${fullReport?.servicePorts} Service ports): ${ms(big.initialMs)}, of which nft -f ${ms(fullNftMs)}`);
  console.log(`  bare nft -f of its \`nft list table\` (${dumpLines} lines, ${dumpChains} chains, ${Math.round((dumpBytes ?? 0) / 1024 / 1024)} MiB) into a fresh namespace: ${ms(bare.durationMs)}; nft list table: ${ms(listed.durationMs)}`);
  console.log(`  ratio full sync / bare nft -f: ${(big.initialMs / bare.durationMs).toFixed(2)}; its nft -f / bare: ${(fullNftMs / bare.durationMs).toFixed(2)}`);
  figures.push(
    { name: 'full sync / bare nft -f', value: big.initialMs / bare.durationMs, unit: 'x', better: 'lower' },
    { name: 'full sync nft -f / bare nft -f', value: fullNftMs / bare.durationMs, unit: 'x', better: 'lower' },
    { name: 'full sync', value: big.initialMs, unit: 'ms', better: 'lower' },
    { name: 'bare nft -f', value: bare.durationMs, unit: 'ms', better: 'lower' },
  );

  // One endpoint replaced at SERVICES and at 100 Services, rounds interleaved; each checked in the kernel after.
  const smallCluster = cluster(SMALL, ENDPOINTS);
  const small = await startProxy(world, smallNs, smallCluster);
  await big.settle();
  const unchangedAt = bigCluster.fire();
  const unchanged = await big.servedSince(unchangedAt);
  console.log(`unchanged event sync at ${SERVICES}: ${ms(unchanged.endedAt - unchangedAt)} (${big.controller.lastSync()?.writes.ipv4?.mode})`);
  const latency = { big: [] as number[], small: [] as number[] };
  const nftMs = { big: [] as number[], small: [] as number[] };
  const bareMs = { big: [] as number[], small: [] as number[] };
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [key, proxy, where, netns] of [['big', big, bigCluster, bigNs], ['small', small, smallCluster, smallNs]] as const) {
      await proxy.settle();
      const address = where.replaceOne(round);
      const firedAt = where.fire();
      const served = await proxy.servedSince(firedAt);
      latency[key].push(served.endedAt - firedAt);
      const write = proxy.controller.lastSync()?.writes.ipv4;
      nftMs[key].push(write?.nftMs ?? Number.NaN);
      if (write?.mode !== 'partial') throw new Error(`round ${round}: the event sync wrote ${write?.mode}, not partial`);
      const chain = hashedName(PREFIX.cluster, servicePortBase(`bench/svc-${where.target}`, 'tcp', 'http'));
      const inKernel = await nftIn(netns, `list chain ${TABLE} '${chain}'`);
      if (!inKernel.stdout.includes(`${address}/8080`)) throw new Error(`round ${round}: ${address} is not in ${chain} after the sync at ${key}`);
      // nft's own floor at this table size: one map element added and deleted again, one bare transaction.
      const element = `10.255.255.254 . tcp . 9`;
      const floor = await world.runner.run({ command: 'nft', args: ['-f', '-'], netns, input: `add element ${TABLE} service-ips { ${element} : goto ${chain} }\ndelete element ${TABLE} service-ips { ${element} }\n` });
      bareMs[key].push(floor.durationMs);
    }
  }
  const atBig = median(latency.big);
  const atSmall = median(latency.small);
  console.log(`one endpoint replaced, event to kernel, median of ${ROUNDS} (each checked with nft list chain):`);
  console.log(`  ${SERVICES} Services: ${atBig.toFixed(1)} ms (nft -f ${median(nftMs.big).toFixed(1)} ms; rounds ${latency.big.map((v) => v.toFixed(0)).join(', ')})`);
  console.log(`  ${SMALL} Services: ${atSmall.toFixed(1)} ms (nft -f ${median(nftMs.small).toFixed(1)} ms; rounds ${latency.small.map((v) => v.toFixed(0)).join(', ')})`);
  console.log(`  ratio ${(atBig / atSmall).toFixed(2)}; nft -f ${(median(nftMs.big) / median(nftMs.small)).toFixed(2)}`);
  console.log(`  a bare one-element nft -f transaction: ${median(bareMs.big).toFixed(1)} ms at ${SERVICES}, ${median(bareMs.small).toFixed(1)} ms at ${SMALL} (${(median(bareMs.big) / median(bareMs.small)).toFixed(2)}x)`);
  figures.push(
    { name: 'one endpoint change, event to kernel', value: atBig, unit: 'ms', better: 'lower' },
    { name: 'one endpoint change at N / at 100', value: atBig / atSmall, unit: 'x', better: 'lower' },
    { name: 'one endpoint change nft -f at N / at 100', value: median(nftMs.big) / median(nftMs.small), unit: 'x', better: 'lower' },
    { name: 'bare one-element nft -f at N / at 100', value: median(bareMs.big) / median(bareMs.small), unit: 'x', better: 'lower' },
    { name: 'bare one-element nft -f', value: median(bareMs.big), unit: 'ms', better: 'lower' },
    { name: 'unchanged event sync', value: unchanged.endedAt - unchangedAt, unit: 'ms', better: 'lower' },
  );

  await big.settle();
  const periodicStarted = performance.now();
  const periodic = await big.controller.runObservedSync('periodic');
  if (!periodic.ok) throw periodic.error;
  const periodicMs = performance.now() - periodicStarted;
  console.log(`periodic sync at ${SERVICES} (nft list table, drift check, whole table written): ${ms(periodicMs)}, of which nft -f ${ms(big.controller.lastSync()?.writes.ipv4?.nftMs ?? 0)}`);
  figures.push({ name: 'periodic sync', value: periodicMs, unit: 'ms', better: 'lower' });
  await big.scheduler.stop();
  await small.scheduler.stop();
  await world.drop(bigNs);
  await world.drop(smallNs);

  // Restart at SERVICES x 2 on a served node: every Service answers a real connection through the node.
  const served = await world.connect('restart');
  const targets = Array.from({ length: SERVICES }, (_, i) => `${clusterIp(i)}:80`);
  const sample = targets.filter((_, i) => i % Math.max(1, Math.floor(SERVICES / 200)) === 0);
  const first = await startProxy(world, served.node, cluster(SERVICES, RESTART_ENDPOINTS));
  const firstProbe = await world.probe(served.client, targets);
  if (firstProbe.answered !== SERVICES) throw new Error(`after the first sync ${firstProbe.failedCount} Services did not answer: ${JSON.stringify(firstProbe.failed)}`);
  console.log(`restart world (${SERVICES} x ${RESTART_ENDPOINTS}): first sync ${ms(first.initialMs)}; all ${SERVICES} Services answered a TCP connection in ${ms(firstProbe.ms)}`);
  await first.scheduler.stop();

  // A new controller (new caches, new objects) adopts the table; a sample is probed while it syncs.
  const adoptStarted = performance.now();
  let adopting = true;
  const duringAdoption = { rounds: 0, answered: 0, failed: 0 };
  const prober = (async () => {
    while (adopting) {
      const pass = await world.probe(served.client, sample);
      duringAdoption.rounds++;
      duringAdoption.answered += pass.answered;
      duringAdoption.failed += pass.failedCount;
    }
  })();
  const adopter = await startProxy(world, served.node, cluster(SERVICES, RESTART_ENDPOINTS));
  const adoptMs = performance.now() - adoptStarted;
  adopting = false;
  await prober;
  const elements = (await nftIn(served.node, `list map ${TABLE} service-ips | grep -o 'goto service-' | wc -l`)).stdout.trim();
  const adoptProbe = await world.probe(served.client, targets);
  if (Number(elements) !== SERVICES || adoptProbe.answered !== SERVICES) throw new Error(`after the adoption: ${elements} service-ips elements, ${adoptProbe.answered} Services answered (${JSON.stringify(adoptProbe.failed)})`);
  console.log(`restart, table in place: a new controller's first sync ends ${ms(adoptMs)} after it was created (${elements} Services in service-ips); every Service answered ${ms(adoptMs + adoptProbe.ms)} after`);
  console.log(`  while it synced: ${duringAdoption.rounds} probe passes of ${sample.length} Services, ${duringAdoption.answered} answered, ${duringAdoption.failed} failed`);
  await adopter.scheduler.stop();

  // The same from an empty kernel (the table gone, as after a reboot): until every Service answers.
  await nftIn(served.node, `delete table ${TABLE}`);
  const coldStarted = performance.now();
  const cold = await startProxy(world, served.node, cluster(SERVICES, RESTART_ENDPOINTS));
  const coldProbe = await world.probe(served.client, targets, 30_000);
  const coldMs = performance.now() - coldStarted;
  if (coldProbe.answered !== SERVICES) throw new Error(`cold restart: ${coldProbe.failedCount} Services did not answer (${JSON.stringify(coldProbe.failed)})`);
  console.log(`restart, empty kernel: first sync ${ms(cold.initialMs)}; every Service answered ${ms(coldMs)} after the controller was created`);
  await cold.scheduler.stop();
  figures.push(
    { name: 'restart adopting the table, until the kernel holds every Service', value: adoptMs, unit: 'ms', better: 'lower' },
    { name: 'restart adopting the table, until every Service answered', value: adoptMs + adoptProbe.ms, unit: 'ms', better: 'lower' },
    { name: 'restart adopting the table, failed probes meanwhile', value: duringAdoption.failed, unit: 'connections', better: 'lower' },
    { name: 'restart from an empty kernel, until every Service answered', value: coldMs, unit: 'ms', better: 'lower' },
  );

  const rss = MiB();
  console.log(`peak RSS of the bench process: ${Math.round(rss)} MiB (${Math.round(rssAfterFull)} MiB by the end of the first full sync)`);
  figures.push({ name: 'peak RSS', value: rss, unit: 'MiB', better: 'lower' });
  reportBench({ plugin: 'proxy-nftables', figures });
} finally {
  await rm(dumpFile, { force: true });
  await world.tearDown();
}
