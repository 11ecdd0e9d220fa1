// The proxy at scale on a real IPVS kernel (the host's when it has IPVS, else the QEMU guest):
//   npm run bench -w @kube-router/proxy-ipvs            (BENCH_SERVICES, BENCH_ENDPOINTS override the 10,000 x 10)
// Prints the full sync time and its ratio to a bare `ipvsadm -R` of the same state, the IPVS operations and time of
// one endpoint change (at 100 Services and at the full size: the ratio says whether it grows with the cluster), the
// unchanged sync time and the agent process's peak RSS. Times are measured in one run.
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { ServiceRegistry } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import { ipvsRestoreLine } from '@kube-router/netfilter';
import { reportBench } from '@kube-router/testkit/bench';
import { openIpvsKernel } from '@kube-router/testkit/qemu';
import pino from 'pino';
import { createProxyController } from '../src/controller.js';
import type { ProxySources } from '../src/controller.js';
import { proxyIpvsOptions } from '../src/options.js';

const SERVICES = Number(process.env.BENCH_SERVICES ?? 10_000);
/** The small cluster one endpoint change at SERVICES is compared with. */
const SMALL = Math.min(100, SERVICES);
const CHANGE_ROUNDS = 7;
const ENDPOINTS = Number(process.env.BENCH_ENDPOINTS ?? 10);
const NODE = 'bench-node';

const clusterIp = (i: number) => `10.96.${Math.floor(i / 250)}.${(i % 250) + 1}`;
const endpointIp = (i: number, j: number) => {
  const n = i * ENDPOINTS + j;
  return `10.${100 + Math.floor(n / 62_500)}.${Math.floor(n / 250) % 250}.${(n % 250) + 1}`;
};

const services: V1Service[] = [];
const slices = new Map<string, V1EndpointSlice[]>();
for (let i = 0; i < SERVICES; i++) {
  const name = `svc-${i}`;
  services.push({ metadata: { namespace: 'bench', name }, spec: { type: 'ClusterIP', clusterIP: clusterIp(i), clusterIPs: [clusterIp(i)], ports: [{ name: 'http', protocol: 'TCP', port: 80 }] } });
  slices.set(`bench/${name}`, [sliceOf(name, Array.from({ length: ENDPOINTS }, (_, j) => endpointIp(i, j)))]);
}
function sliceOf(name: string, ips: string[]): V1EndpointSlice {
  return {
    addressType: 'IPv4',
    metadata: { namespace: 'bench', name: `${name}-a`, labels: { 'kubernetes.io/service-name': name } },
    ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
    endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true }, nodeName: NODE })),
  };
}
const node: V1Node = { metadata: { name: NODE }, status: { addresses: [{ type: 'InternalIP', address: '192.168.99.1' }] } };
/** How many of the Services the cluster has now: the small one first, then all. */
let active = SERVICES;
const sources: ProxySources = {
  services: () => services.slice(0, active),
  slicesFor: (namespace, name) => slices.get(`${namespace}/${name}`) ?? [],
  node: () => node,
  hasSynced: () => true,
  onChange: () => () => undefined,
  warnService: () => undefined,
};

const bootStarted = performance.now();
const kernel = await openIpvsKernel({ memoryMiB: 3072 });
try {
  console.log(`kernel: ${kernel.where}${kernel.guest ? ` ${kernel.guest.info.kernelRelease}, booted in ${kernel.guest.info.bootMs} ms` : ''} (${Math.round(performance.now() - bootStarted)} ms with image)`);
  const netns = kernel.where === 'host' ? 'tipvs-bench' : undefined;
  if (netns) await kernel.sh(`ip netns add ${netns}`);
  const run = (args: string[], input?: string) =>
    kernel.runner.run({ command: 'ipvsadm', args, timeoutMs: 900_000, ...(input !== undefined && { input }), ...(netns && { netns }) });

  // The same state as one bare restore: the floor any ipvsadm-based proxy pays.
  const lines: string[] = [];
  for (let i = 0; i < SERVICES; i++) {
    const service = { protocol: 'tcp' as const, address: clusterIp(i), port: 80, scheduler: 'rr', flags: [] };
    lines.push(ipvsRestoreLine.addService(service));
    for (let j = 0; j < ENDPOINTS; j++) lines.push(ipvsRestoreLine.addDestination(service, { address: endpointIp(i, j), port: 8080, forwarding: 'masquerade', weight: 1 }));
  }
  await run(['-C']);
  const bare = await run(['-R'], `${lines.join('\n')}\n`);
  const bareSave = await run(['-Sn']);
  await run(['-C']);
  console.log(`bare ipvsadm -R of ${lines.length} lines: ${bare.durationMs} ms; ipvsadm -Sn of it: ${bareSave.durationMs} ms`);

  const logger = pino({ level: 'silent' });
  const startController = async () => {
    const metrics = new AgentMetrics({ collectDefaultMetrics: false });
    const ctx = { nodeName: NODE, logger, metrics, health: new HealthRegistry({ defaultGraceMs: 600_000 }), services: new ServiceRegistry() };
    const started = createProxyController(ctx, { sources, runner: kernel.runner }, proxyIpvsOptions.parse({ enableIpv6: false, commandTimeoutMs: 900_000, syncTimeoutMs: 0, syncPeriodMs: 3_600_000, ...(netns && { netns }) }));
    await started.start({ requestSync: () => undefined, signal: new AbortController().signal });
    return started;
  };
  let controller = await startController();
  const timed = async (reason: string) => {
    const started = performance.now();
    const outcome = await controller.runObservedSync(reason);
    if (!outcome.ok) throw outcome.error;
    return { wallMs: Math.round(performance.now() - started), report: controller.lastSync() };
  };
  /** The median event sync of one endpoint of the middle Service replaced, and put back, round after round. */
  const endpointChange = async (size: number) => {
    const target = Math.floor(size / 2);
    const original = Array.from({ length: ENDPOINTS }, (_, j) => endpointIp(target, j));
    const times: number[] = [];
    let operations = 0;
    for (let round = 0; round < CHANGE_ROUNDS; round++) {
      slices.set(`bench/svc-${target}`, [sliceOf(`svc-${target}`, round % 2 === 0 ? [...original.slice(1), '10.250.0.2'] : original)]);
      const change = await timed('cluster changed');
      if (change.report?.ipvsStateFrom !== 'model') throw new Error(`the event sync read IPVS (${change.report?.ipvsStateFrom})`);
      times.push(change.wallMs);
      operations = change.report?.ipvsOperations ?? 0;
    }
    slices.set(`bench/svc-${target}`, [sliceOf(`svc-${target}`, original)]);
    await timed('cluster changed');
    const sorted = [...times].sort((a, b) => a - b);
    return { medianMs: sorted[Math.floor(sorted.length / 2)]!, operations };
  };

  // The small cluster first, in the same kernel and process.
  active = SMALL;
  await timed('initial');
  const small = await endpointChange(SMALL);
  console.log(`one endpoint replaced at ${SMALL} Services: event sync ${small.medianMs} ms (median of ${CHANGE_ROUNDS}), ${small.operations} IPVS operations`);
  await controller.stop();
  await run(['-C']);
  active = SERVICES;
  controller = await startController();

  const full = await timed('initial');
  console.log(`full sync (${SERVICES} Services x ${ENDPOINTS} endpoints, VIPs, ipsets, chains): ${full.wallMs} ms; IPVS restore ${full.report?.ipvsRestoreMs} ms, ${full.report?.ipvsOperations} operations`);
  console.log(`  ratio full sync / bare ipvsadm -R: ${(full.wallMs / bare.durationMs).toFixed(2)}; IPVS restore / bare: ${((full.report?.ipvsRestoreMs ?? 0) / bare.durationMs).toFixed(2)}`);
  const unchanged = await timed('cluster changed');
  console.log(`unchanged sync: ${unchanged.wallMs} ms (IPVS read ${unchanged.report?.ipvsSaveMs} ms), ${unchanged.report?.ipvsOperations} IPVS operations`);
  const periodic = await timed('periodic');
  console.log(`unchanged periodic (full) sync: ${periodic.wallMs} ms, ${periodic.report?.ipvsOperations} IPVS operations`);

  const target = Math.floor(SERVICES / 2);
  slices.set(`bench/svc-${target}`, [sliceOf(`svc-${target}`, [...Array.from({ length: ENDPOINTS }, (_, j) => endpointIp(target, j)).slice(1), '10.250.0.1'])]);
  const change = await timed('cluster changed');
  const applied = (await run(['-Sn'])).stdout.includes(`-a -t ${clusterIp(target)}:80 -r 10.250.0.1:8080 -m -w 1`);
  console.log(`one endpoint replaced: ${change.report?.ipvsOperations} IPVS operations (an add and a delete), sync ${change.wallMs} ms, applied: ${applied}`);
  if (!applied) throw new Error('the endpoint change did not reach IPVS');
  slices.set(`bench/svc-${target}`, [sliceOf(`svc-${target}`, [...Array.from({ length: ENDPOINTS }, (_, j) => endpointIp(target, j)), '10.250.0.1'])]);
  const added = await timed('cluster changed');
  console.log(`one endpoint added: ${added.report?.ipvsOperations} IPVS operation(s), sync ${added.wallMs} ms`);
  const large = await endpointChange(SERVICES);
  console.log(`one endpoint replaced at ${SERVICES} Services: event sync ${large.medianMs} ms (median of ${CHANGE_ROUNDS}); ${(large.medianMs / small.medianMs).toFixed(2)}x the same at ${SMALL}`);
  console.log(`peak RSS of the agent process: ${Math.round(process.resourceUsage().maxRSS / 1024)} MiB`);
  reportBench({
    plugin: 'proxy-ipvs',
    figures: [
      { name: 'full sync / bare ipvsadm -R', value: full.wallMs / bare.durationMs, unit: 'x', better: 'lower' },
      { name: 'IPVS restore / bare ipvsadm -R', value: (full.report?.ipvsRestoreMs ?? 0) / bare.durationMs, unit: 'x', better: 'lower' },
      { name: 'full sync', value: full.wallMs, unit: 'ms', better: 'lower' },
      { name: 'unchanged sync', value: unchanged.wallMs, unit: 'ms', better: 'lower' },
      { name: 'one endpoint replaced, IPVS operations', value: change.report?.ipvsOperations ?? Number.NaN, unit: 'operations', better: 'lower' },
      { name: `one endpoint change at ${SMALL} Services`, value: small.medianMs, unit: 'ms', better: 'lower' },
      { name: `one endpoint change at ${SERVICES} Services`, value: large.medianMs, unit: 'ms', better: 'lower' },
      { name: `one endpoint change, ${SERVICES} / ${SMALL} Services`, value: large.medianMs / small.medianMs, unit: 'x', better: 'lower' },
      { name: 'peak RSS', value: process.resourceUsage().maxRSS / 1024, unit: 'MiB', better: 'lower' },
    ],
  });
  await controller.stop();
  await run(['-C']);
  if (netns) await kernel.sh(`ip netns del ${netns}`);
} finally {
  await kernel.close();
}
