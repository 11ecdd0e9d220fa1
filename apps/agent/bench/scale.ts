/**
 * The agent at scale, measured alone: the reference CLI, firewall only (netpol-iptables, IPv4 + IPv6), in its own
 * process and network namespace; the embedded API server in this process, reached over a veth pair. For each size
 * (pods, one policy per five pods, 200 pods on the agent's node):
 *
 * - memory: RSS and heap after a full GC, once the first sync is done and again after churn at a constant size
 *   (pods replaced, labels flipped, policies updated);
 * - the first full sync (the agent's own sync duration metric) against a bare ipset restore + iptables-restore +
 *   ip6tables-restore of the rules it wrote, into a fresh namespace;
 * - the longest event-loop stall from informer start to ready, and during churn (nodejs_eventloop_lag_max_seconds,
 *   reset on every scrape), and how /healthz answered meanwhile;
 * - a pod label change to the pod's address in the kernel set (median of a few, with the cluster idle and under churn);
 * - kernel rules and sets per local pod.
 *
 *   SCALE_SIZES=1000,10000,50000 npm run bench -w @kube-router/agent    (default 1000,10000)
 *   SCALE_CHURN_ROUNDS=20 (each: 1% of pods replaced, 1% relabelled, 1% of policies updated)
 *   SCALE_AGENT=source (run the agent from source through tsx instead of bundled), SCALE_CPU_PROF=<dir> (profiles)
 *
 * Needs root, iproute2, iptables, ip6tables and ipset. Prints what it measured; it never passes or fails on numbers.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { addNetns, deleteNetns } from '@kube-router/netfilter';
import { startApiServer } from '@kube-router/testkit';
import { reportBench, type BenchFigure } from '@kube-router/testkit/bench';
import { bundleAgent, createScaleNetns, labelChangeToEnforced, MeasuredAgent, metricValue, runner, type AfterGc } from '../src/testing/measured-agent.js';
import { scaleShape, ScaleWorld } from '../src/testing/scale-world.js';

const SIZES = (process.env.SCALE_SIZES ?? '1000,10000').split(',').map((size) => Number(size.trim()));
const CHURN_ROUNDS = Number(process.env.SCALE_CHURN_ROUNDS ?? 20);
const LABEL_ROUNDS = 9;
const READY_TIMEOUT_MS = 60 * 60_000;

const MiB = 2 ** 20;
const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;
const benchStart = performance.now();
const step = (what: string) => console.error(`[${((performance.now() - benchStart) / 1000).toFixed(0)} s] ${what}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls /healthz every 200 ms until stopped: the slowest answer and how many did not come within a second. */
function pollHealth(url: string): { stop(): Promise<{ probes: number; failed: number; slowestMs: number }> } {
  let running = true;
  const result = { probes: 0, failed: 0, slowestMs: 0 };
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      try {
        const response = await fetch(`${url}:20244/healthz`, { signal: AbortSignal.timeout(1_000) });
        await response.body?.cancel();
        if (response.status !== 200) result.failed++;
      } catch {
        result.failed++;
      }
      result.probes++;
      result.slowestMs = Math.max(result.slowestMs, performance.now() - started);
      await sleep(200);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return result;
    },
  };
}

interface SizeResult {
  pods: number;
  policies: number;
  figures: BenchFigure[];
  afterSync: AfterGc;
  afterChurn: AfterGc;
}

async function measureSize(pods: number, bundle: string | undefined): Promise<SizeResult> {
  const shape = scaleShape(pods);
  const label = pods >= 1000 ? `${pods / 1000}k` : String(pods);
  step(`${label} pods, ${shape.policies} policies: setting up`);
  const netns = await createScaleNetns();
  const bareNetns = `${netns.name}-b`;
  const dir = await mkdtemp(join(tmpdir(), 'sc-bench-'));
  let agent: MeasuredAgent | undefined;
  const pollers: ReturnType<typeof pollHealth>[] = [];
  const api = await startApiServer({ host: netns.hostIp, port: 0, historyLimit: 200_000 });
  try {
    await addNetns(runner, bareNetns);
    const world = new ScaleWorld(api, shape);
    world.seed();
    const kubeconfig = await api.writeKubeconfig(join(dir, 'kubeconfig'));
    step(`${label}: seeded; starting the agent`);

    // SCALE_CPU_PROF=<dir>: a CPU profile of each agent, written when it stops, to find what holds the loop.
    const profile = process.env.SCALE_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.SCALE_CPU_PROF}`] : [];
    agent = new MeasuredAgent(netns, kubeconfig, { ...(bundle && { bundle }), nodeOptions: profile });
    // The first scrape resets the stall gauge: what follows is the informers' list and the first sync, not the
    // loading of the agent's modules.
    await agent.waitForMetrics(120_000);
    const health = pollHealth(agent.url);
    pollers.push(health);
    const readyMs = await agent.waitUntilReady(READY_TIMEOUT_MS);
    const healthDuringStart = await health.stop();
    const atReady = await agent.metrics();
    const stallAtStartMs = (metricValue(atReady, 'nodejs_eventloop_lag_max_seconds') ?? Number.NaN) * 1000;
    const firstSync = agent.syncs[0];
    if (!firstSync) throw new Error('ready without a logged netpol sync');
    const firstSyncMs = firstSync.durationMs;
    const firstComputeMs = firstSync.computeMs ?? Number.NaN;
    const afterSync = await agent.afterGc();
    step(`${label}: ready after ${(readyMs / 1000).toFixed(1)} s`);
    const syncs = metricValue(atReady, 'kube_router_controller_sync_duration_seconds_count', { controller: 'netpol' }) ?? 0;

    // The same rules, bare, into a fresh namespace: the floor for writing them.
    const saved = {
      v4: (await runner.run({ command: 'iptables-save', args: ['-t', 'filter'], netns: netns.name })).stdout,
      v6: (await runner.run({ command: 'ip6tables-save', args: ['-t', 'filter'], netns: netns.name })).stdout,
      sets: (await runner.run({ command: 'ipset', args: ['save'], netns: netns.name })).stdout,
    };
    const bareStarted = performance.now();
    await runner.run({ command: 'ipset', args: ['restore'], input: saved.sets, netns: bareNetns });
    await runner.run({ command: 'iptables-restore', input: saved.v4, netns: bareNetns });
    await runner.run({ command: 'ip6tables-restore', input: saved.v6, netns: bareNetns });
    const bareMs = performance.now() - bareStarted;
    const rules = [saved.v4, saved.v6].join('\n').split('\n').filter((line) => line.startsWith('-A ')).length;
    const sets = saved.sets.split('\n').filter((line) => line.startsWith('create ')).length;
    const members = saved.sets.split('\n').filter((line) => line.startsWith('add ')).length;
    step(`${label}: first sync ${firstSyncMs.toFixed(0)} ms (${syncs} syncs by ready), bare restore ${bareMs.toFixed(0)} ms`);

    const applying = world.policiesSelectingLocalPods();
    if (applying.length === 0) {
      // An empty cluster: what the agent costs before it holds anything, the base of the growth per pod.
      console.log(`agent with no pods: RSS ${(afterSync.rssBytes / MiB).toFixed(0)} MiB, heap after GC ${(afterSync.heapUsedBytes / MiB).toFixed(1)} MiB, ready after ${(readyMs / 1000).toFixed(1)} s`);
      const figures: BenchFigure[] = [
        { name: 'empty cluster: RSS', value: afterSync.rssBytes / MiB, unit: 'MiB', better: 'lower' },
        { name: 'empty cluster: heap', value: afterSync.heapUsedBytes / MiB, unit: 'MiB', better: 'lower' },
      ];
      return { pods, policies: shape.policies, figures, afterSync, afterChurn: afterSync };
    }

    // Label change -> enforced, the cluster otherwise idle. Policies that select local pods, spread over the list.
    const probePolicy = (round: number) => applying[Math.floor(((round % 5) * applying.length) / 5)]!;
    const idleLatencies: number[] = [];
    const syncsBeforeProbes = agent.syncs.length;
    for (let round = 0; round < LABEL_ROUNDS; round++) {
      await sleep(1_100); // past the minimum sync interval, so that each sample starts from an idle loop
      idleLatencies.push(await labelChangeToEnforced(netns.name, world.labelProbe(probePolicy(round), round)));
    }
    step(`${label}: label change -> enforced, median ${median(idleLatencies).toFixed(0)} ms`);
    // The agent's own part of those: its event syncs as it logs them (compile + render, and the whole sync with the
    // kernel writes), without the probe's polling of `ipset test`, which a busy machine slows.
    const probeSyncs = agent.syncs.slice(syncsBeforeProbes);
    const probeSyncMs = median(probeSyncs.map((sync) => sync.durationMs));
    const probeComputeMs = median(probeSyncs.map((sync) => sync.computeMs ?? Number.NaN));

    // Churn at a constant size; each round ends with a label probe, whose enforcement shows the round is synced.
    await agent.metrics(); // resets the stall gauge
    const counts = { replace: Math.ceil(pods / 100), flip: Math.ceil(pods / 100), update: Math.ceil(shape.policies / 100) };
    const churnLatencies: number[] = [];
    const churnHealth = pollHealth(agent.url);
    pollers.push(churnHealth);
    for (let round = 0; round < CHURN_ROUNDS; round++) {
      world.churn(counts);
      churnLatencies.push(await labelChangeToEnforced(netns.name, world.labelProbe(probePolicy(round), LABEL_ROUNDS + round)));
    }
    const healthDuringChurn = await churnHealth.stop();
    const afterChurnMetrics = await agent.metrics();
    const stallInChurnMs = (metricValue(afterChurnMetrics, 'nodejs_eventloop_lag_max_seconds') ?? Number.NaN) * 1000;
    // Event syncs compile the objects that changed; full syncs (and those after too many changes at once) the lists.
    const compiles = (input: string) => metricValue(afterChurnMetrics, 'kube_router_netpol_compiles_total', { input }) ?? 0;
    const afterChurn = await agent.afterGc();
    const peakRss = (await agent.peakRssBytes()) / MiB;
    step(`${label}: churned ${CHURN_ROUNDS} rounds of ${JSON.stringify(counts)}`);

    const local = shape.localPods;
    console.log(`agent at ${label} pods (${local} local), ${shape.policies} policies (${applying.length} select local pods), IPv4 + IPv6`);
    console.log(`  ready ${(readyMs / 1000).toFixed(1)} s after the process started; ${syncs} netpol syncs by then`);
    console.log(`  after the first sync:  RSS ${(afterSync.rssBytes / MiB).toFixed(0)} MiB, heap after GC ${(afterSync.heapUsedBytes / MiB).toFixed(1)} MiB`);
    console.log(`  peak RSS ${peakRss.toFixed(0)} MiB`);
    console.log(`  after churn:           RSS ${(afterChurn.rssBytes / MiB).toFixed(0)} MiB, heap after GC ${(afterChurn.heapUsedBytes / MiB).toFixed(1)} MiB (${CHURN_ROUNDS} rounds: ${counts.replace} pods replaced, ${counts.flip} relabelled, ${counts.update} policies updated each)`);
    console.log(`  first full sync ${firstSyncMs.toFixed(0)} ms (compile + render ${firstComputeMs.toFixed(0)} ms); bare ipset + iptables + ip6tables restore of the same ${bareMs.toFixed(0)} ms; ratio ${(firstSyncMs / bareMs).toFixed(2)}x`);
    console.log(`  longest event-loop stall: ${stallAtStartMs.toFixed(0)} ms from informer start to ready, ${stallInChurnMs.toFixed(0)} ms during churn`);
    console.log(`  /healthz: slowest ${healthDuringStart.slowestMs.toFixed(0)} ms, ${healthDuringStart.failed} of ${healthDuringStart.probes} over 1 s during start; slowest ${healthDuringChurn.slowestMs.toFixed(0)} ms, ${healthDuringChurn.failed} of ${healthDuringChurn.probes} during churn`);
    console.log(`  label change -> enforced: median ${median(idleLatencies).toFixed(0)} ms idle (${idleLatencies.map((v) => v.toFixed(0)).join(', ')}), ${median(churnLatencies).toFixed(0)} ms under churn`);
    console.log(`  event syncs of the label changes: median ${probeSyncMs.toFixed(0)} ms (compile + render ${probeComputeMs.toFixed(1)} ms) of ${probeSyncs.length}`);
    console.log(`  netpol compiles: ${compiles('changes')} from the changed objects, ${compiles('lists')} from the full lists`);
    console.log(`  kernel: ${rules} rules, ${sets} sets, ${members} set members; per local pod ${(rules / local).toFixed(1)} rules, ${(sets / local).toFixed(1)} sets`);

    const figures: BenchFigure[] = [
      { name: `${label}: ready`, value: readyMs, unit: 'ms', better: 'lower' },
      { name: `${label}: /healthz answers over 1 s, start and churn`, value: healthDuringStart.failed + healthDuringChurn.failed, unit: 'probes', better: 'lower' },
      { name: `${label}: RSS after first sync`, value: afterSync.rssBytes / MiB, unit: 'MiB', better: 'lower' },
      { name: `${label}: heap after first sync`, value: afterSync.heapUsedBytes / MiB, unit: 'MiB', better: 'lower' },
      { name: `${label}: RSS after churn`, value: afterChurn.rssBytes / MiB, unit: 'MiB', better: 'lower' },
      { name: `${label}: heap growth under churn`, value: (afterChurn.heapUsedBytes - afterSync.heapUsedBytes) / MiB, unit: 'MiB', better: 'lower' },
      { name: `${label}: peak RSS`, value: peakRss, unit: 'MiB', better: 'lower' },
      { name: `${label}: first full sync`, value: firstSyncMs, unit: 'ms', better: 'lower' },
      { name: `${label}: first sync compile + render`, value: firstComputeMs, unit: 'ms', better: 'lower' },
      { name: `${label}: first full sync / bare restore`, value: firstSyncMs / bareMs, unit: 'x', better: 'lower' },
      { name: `${label}: longest event-loop stall, start`, value: stallAtStartMs, unit: 'ms', better: 'lower' },
      { name: `${label}: longest event-loop stall, churn`, value: stallInChurnMs, unit: 'ms', better: 'lower' },
      { name: `${label}: label change -> enforced`, value: median(idleLatencies), unit: 'ms', better: 'lower' },
      { name: `${label}: label change event sync`, value: probeSyncMs, unit: 'ms', better: 'lower' },
      { name: `${label}: label change event sync, compile + render`, value: probeComputeMs, unit: 'ms', better: 'lower' },
      { name: `${label}: label change -> enforced under churn`, value: median(churnLatencies), unit: 'ms', better: 'lower' },
      { name: `${label}: kernel rules per local pod`, value: rules / local, unit: 'rules', better: 'lower' },
      { name: `${label}: kernel sets per local pod`, value: sets / local, unit: 'sets', better: 'lower' },
    ];
    return { pods, policies: shape.policies, figures, afterSync, afterChurn };
  } finally {
    for (const poller of pollers) await poller.stop();
    await agent?.stop();
    await api.close();
    await deleteNetns(runner, bareNetns).catch(() => undefined);
    await netns.remove();
    await rm(dir, { recursive: true, force: true });
  }
}

const results: SizeResult[] = [];
const bundleDir = await mkdtemp(join(tmpdir(), 'sc-agent-'));
try {
  // The agent as it ships (plain node, no tsx), unless SCALE_AGENT=source asks for the source through tsx.
  const bundle = process.env.SCALE_AGENT === 'source' ? undefined : await bundleAgent(bundleDir);
  console.log(`agent scale bench: ${bundle ? 'the agent bundled, run by plain node' : 'the agent from source through tsx'} (node ${process.version})`);
  for (const pods of SIZES) results.push(await measureSize(pods, bundle));
} catch (error) {
  console.error(error);
  process.exitCode = 1;
} finally {
  await rm(bundleDir, { recursive: true, force: true });
}
if (results.length > 0) {
  const figures = results.flatMap((result) => result.figures);
  // Growth no worse than linear: memory per pod between successive sizes.
  for (const [previous, next] of results.slice(0, -1).map((result, i) => [result, results[i + 1]!] as const)) {
    const perThousand = ((next.afterSync.rssBytes - previous.afterSync.rssBytes) / MiB / (next.pods - previous.pods)) * 1000;
    console.log(`  RSS growth from ${previous.pods} to ${next.pods} pods: ${perThousand.toFixed(2)} MiB per 1,000 pods`);
    figures.push({ name: `RSS growth per 1k pods, ${previous.pods} -> ${next.pods}`, value: perThousand, unit: 'MiB', better: 'lower' });
  }
  // Label change -> enforced should cost what the change does, not what the cluster holds: each size against the
  // smallest non-empty one, measured in this run (goal: within 1.2x).
  for (const measure of ['label change -> enforced', 'label change event sync']) {
    const latency = (result: SizeResult) => result.figures.find((figure) => figure.name.endsWith(`: ${measure}`))?.value;
    const base = results.find((result) => latency(result) !== undefined);
    for (const result of results) {
      const value = latency(result);
      const baseValue = base && latency(base);
      if (!base || result === base || value === undefined || baseValue === undefined) continue;
      const ratio = value / baseValue;
      console.log(`  ${measure} at ${result.pods} pods / at ${base.pods} pods: ${ratio.toFixed(2)}x`);
      figures.push({ name: `${measure}, ${result.pods} / ${base.pods} pods`, value: ratio, unit: 'x', better: 'lower' });
    }
  }
  reportBench({ plugin: 'agent', bench: 'scale', figures });
}
