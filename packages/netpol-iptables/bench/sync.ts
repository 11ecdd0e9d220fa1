/**
 * Full-sync and event-to-enforced benchmark of the netpol iptables plugin against the real kernel (a fresh network
 * namespace), the embedded API server and the plugin's informers: 5,000 pods (200 on this node), 1,000 policies.
 *
 *   npm run bench -w @kube-router/netpol-iptables
 *
 * Needs root, iproute2, iptables and ipset.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFile, rm, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { addNetns, deleteNetns, ExecRunner } from '@kube-router/netfilter';
import { benchClock, inNetns, metricSum, startScheduler, startTestEnforcer } from '@kube-router/netpol-testing';
import type { HarnessEnforcer as TestEnforcer } from '@kube-router/netpol-testing';
import { startApiServer } from '@kube-router/testkit';
import type { ApiServer } from '@kube-router/testkit';
import { reportBench } from '@kube-router/testkit/bench';
import { NETPOL_BENCH_CLUSTER, benchFirstRule, benchLabelChange, benchPolicy, median, seedNetpolBenchCluster } from '@kube-router/testkit/netpol-conformance';
import { ruleSetKey } from '@kube-router/netpol';
import { peerPodSetName } from '../src/names.js';
import { iptablesBackend } from '../src/testing/backend.js';

const run = promisify(execFile);
const { node: NODE } = NETPOL_BENCH_CLUSTER;

async function inSet(netns: string, set: string, ip: string): Promise<boolean> {
  try {
    await run('ip', ['netns', 'exec', netns, 'ipset', 'test', set, ip]);
    return true;
  } catch {
    return false;
  }
}

/** From a label change of one remote pod to its IP being in the peer set of the policy that now selects it. */
/** Enough rounds that the median is not at the mercy of one slow process spawn on a busy machine. */
const LABEL_ROUNDS = 15;
/** Distinct pod/policy pairs; each round restores its label, so later rounds repeat them from the same state. */
const LABEL_SCENARIOS = 5;

async function labelChangeToEnforced(api: ApiServer, netns: string, policyCount: number): Promise<number[]> {
  const samples: number[] = [];
  for (let index = 0; index < LABEL_ROUNDS; index++) {
    // A remote pod of policy k's namespace that the policy's first peer does not select yet.
    const { k, namespace, pod, ip, joined, own } = benchLabelChange(index % LABEL_SCENARIOS, policyCount);
    const set = peerPodSetName(`${namespace}/policy-${k}`, 'ingress', ruleSetKey(benchFirstRule(k)), 'ipv4');
    if (await inSet(netns, set, ip)) throw new Error(`bench setup: ${ip} already in ${set}`);
    const started = performance.now();
    api.patch('v1', 'Pod', namespace, pod, { metadata: { labels: { app: joined } } }, 'merge');
    while (!(await inSet(netns, set, ip))) {
      if (performance.now() - started > 30_000) throw new Error('label change not enforced within 30 s');
    }
    samples.push(performance.now() - started);
    // Put the label back so that the next round starts from the same state.
    api.patch('v1', 'Pod', namespace, pod, { metadata: { labels: { app: own } } }, 'merge');
    while (await inSet(netns, set, ip)) await new Promise((resolve) => setTimeout(resolve, 5));
    // Let the minimum sync interval pass, so that every sample starts from an idle loop.
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return samples;
}

const { step, ms } = benchClock();

async function main(): Promise<void> {
  const runner = new ExecRunner();
  const id = randomBytes(2).toString('hex');
  const netns = `nf${id}-bench`;
  const bareNetns = `nf${id}-bare`;
  const dir = await mkdtemp(join(tmpdir(), 'krt-bench-'));
  await addNetns(runner, netns);
  await addNetns(runner, bareNetns);
  const api = await startApiServer({ port: 0 });
  let enforcer: TestEnforcer | undefined;
  try {
    const kubeconfig = await api.writeKubeconfig();
    seedNetpolBenchCluster(api);
    step('seeded');
    for (let k = 0; k < 500; k++) api.create(benchPolicy(k) as never);

    enforcer = await startTestEnforcer(
      iptablesBackend,
      { kubeconfig, nodeName: NODE, netns },
      { options: { minSyncIntervalMs: 50, syncTimeoutMs: 300_000 }, scheduler: false },
    );
    const loopDelay = monitorEventLoopDelay({ resolution: 5 });
    step('enforcer started');

    // Phase 1: 500 policies, full sync, then label changes.
    let outcome = await enforcer.syncNow();
    if (!outcome.ok) throw outcome.error;
    step('first sync with 500 policies done');
    await startScheduler(enforcer);
    const at500 = await labelChangeToEnforced(api, netns, 500);
    step('label changes with 500 policies measured');

    // Phase 2: 1,000 policies. A fresh agent does the full sync from an empty kernel for the timing.
    for (let k = 500; k < 1000; k++) api.create(benchPolicy(k) as never);
    await enforcer.stop();
    await inNetns(netns, 'iptables', ['-F']);
    for (const tool of ['iptables', 'ip6tables']) {
      for (const chain of ['INPUT', 'FORWARD', 'OUTPUT']) await inNetns(netns, tool, ['-F', chain]);
      await inNetns(netns, tool, ['-F']);
      await inNetns(netns, tool, ['-X']);
    }
    await inNetns(netns, 'ipset', ['destroy']);

    enforcer = await startTestEnforcer(
      iptablesBackend,
      { kubeconfig, nodeName: NODE, netns },
      { options: { minSyncIntervalMs: 50, syncTimeoutMs: 300_000 }, scheduler: false },
    );
    await enforcer.waitForInformers();
    loopDelay.enable();
    const fullStarted = performance.now();
    outcome = await enforcer.controller.runObservedSync('bench');
    const fullMs = performance.now() - fullStarted;
    loopDelay.disable();
    step('full sync with 1000 policies done');
    if (!outcome.ok) throw outcome.error;
    const computeMs = (await metricSum(enforcer, 'kube_router_netpol_compute_time')) * 1000;
    const applyMs = (await metricSum(enforcer, 'kube_router_controller_policy_chains_sync_time')) * 1000;
    const chains = (await enforcer.metrics.registry.getSingleMetric('kube_router_controller_policy_chains')?.get())?.values[0]?.value;
    const sets = (await enforcer.metrics.registry.getSingleMetric('kube_router_controller_policy_ipsets')?.get())?.values[0]?.value;

    // The same rules applied bare: what iptables-restore and ipset restore alone cost for them.
    const v4 = await inNetns(netns, 'iptables-save', ['-t', 'filter']);
    const v6 = await inNetns(netns, 'ip6tables-save', ['-t', 'filter']);
    const sets4and6 = await inNetns(netns, 'ipset', ['save']);
    await writeFile(join(dir, 'v4.rules'), v4);
    await writeFile(join(dir, 'v6.rules'), v6);
    await writeFile(join(dir, 'sets'), sets4and6);
    const bareStarted = performance.now();
    await inNetns(bareNetns, 'ipset', ['restore'], sets4and6);
    await inNetns(bareNetns, 'iptables-restore', [], v4);
    await inNetns(bareNetns, 'ip6tables-restore', [], v6);
    const bareMs = performance.now() - bareStarted;
    step('bare restore done');

    const steadyStarted = performance.now();
    outcome = await enforcer.controller.runObservedSync('bench');
    const steadyMs = performance.now() - steadyStarted;
    if (!outcome.ok) throw outcome.error;

    await startScheduler(enforcer);
    const at1000 = await labelChangeToEnforced(api, netns, 1000);
    const usage = process.resourceUsage();
    const memory = process.memoryUsage();

    const lines = [
      `netpol-iptables sync benchmark: 5000 pods (200 on this node), 1000 policies, IPv4 + IPv6`,
      `  kernel objects: ${chains} chains, ${sets} ipsets`,
      `  full sync from an empty kernel: ${ms(fullMs)} (compute: compile + render ${ms(computeMs)}, kernel apply including the first read of the kernel ${ms(applyMs)})`,
      `  bare ipset restore + iptables-restore + ip6tables-restore of the same rules: ${ms(bareMs)}`,
      `  ratio full sync / bare restore: ${(fullMs / bareMs).toFixed(2)}  (apply only / bare: ${(applyMs / bareMs).toFixed(2)})`,
      `  max event-loop delay during the full sync: ${ms(loopDelay.max / 1e6)} (p99 ${ms(loopDelay.percentile(99) / 1e6)})`,
      `  steady-state sync, nothing changed: ${ms(steadyMs)}`,
      `  pod label change -> rules in the kernel, median of ${LABEL_ROUNDS}: ${ms(median(at500))} with 500 policies, ${ms(median(at1000))} with 1000 policies`,
      `  ratio 1000 / 500 policies: ${(median(at1000) / median(at500)).toFixed(2)}  (samples 500: ${at500.map((v) => v.toFixed(0)).join(', ')}; 1000: ${at1000.map((v) => v.toFixed(0)).join(', ')})`,
      `  peak RSS ${(usage.maxRSS / 1024).toFixed(0)} MiB, heap used now ${(memory.heapUsed / 2 ** 20).toFixed(0)} MiB (the embedded API server with 5000 pods runs in the same process)`,
    ];
    console.log(lines.join('\n'));
    reportBench(
      {
        plugin: 'netpol-iptables',
        figures: [
          { name: 'full sync / bare restore', value: fullMs / bareMs, unit: 'x', better: 'lower' },
          { name: 'label change to enforced, 1000 / 500 policies', value: median(at1000) / median(at500), unit: 'x', better: 'lower' },
          { name: 'full sync', value: fullMs, unit: 'ms', better: 'lower' },
          { name: 'bare restore', value: bareMs, unit: 'ms', better: 'lower' },
          { name: 'steady-state sync', value: steadyMs, unit: 'ms', better: 'lower' },
          { name: 'label change to enforced median, 500 policies', value: median(at500), unit: 'ms', better: 'lower' },
          { name: 'label change to enforced median, 1000 policies', value: median(at1000), unit: 'ms', better: 'lower' },
          { name: 'peak RSS', value: usage.maxRSS / 1024, unit: 'MiB', better: 'lower' },
        ],
      },
      { log: false },
    );
  } finally {
    await enforcer?.stop().catch(() => undefined);
    await api.close();
    await deleteNetns(runner, netns).catch(() => undefined);
    await deleteNetns(runner, bareNetns).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  }
}

try {
  await main();
} catch (error) {
  console.error(error);
  process.exitCode = 1;
}
