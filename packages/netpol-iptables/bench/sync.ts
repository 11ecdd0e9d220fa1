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
import { startApiServer } from '@kube-router/testkit';
import type { ApiServer } from '@kube-router/testkit';
import { peerPodSetName, ruleSetKey } from '../src/names.js';
import { startTestEnforcer } from '../src/testing/enforcer.js';
import type { TestEnforcer } from '../src/testing/enforcer.js';

const run = promisify(execFile);
const NODE = 'bench-node';
const NAMESPACES = 50;
const PODS_PER_NAMESPACE = 100;
const LOCAL_PER_NAMESPACE = 4;
const APPS = 20;

function podIp(index: number): { v4: string; v6: string } {
  return { v4: `10.128.${index >> 8}.${index & 255}`, v6: `fd00:128::${index.toString(16)}` };
}

function seedCluster(api: ApiServer): void {
  for (let n = 0; n < NAMESPACES; n++) {
    api.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: `ns-${n}`, labels: { team: `t-${n % 5}` } } } as never);
  }
  let index = 1;
  for (let n = 0; n < NAMESPACES; n++) {
    for (let p = 0; p < PODS_PER_NAMESPACE; p++) {
      const local = p < LOCAL_PER_NAMESPACE;
      const ip = podIp(index++);
      api.create({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          namespace: `ns-${n}`,
          name: `pod-${p}`,
          labels: { app: `app-${p % APPS}`, tier: `tier-${p % LOCAL_PER_NAMESPACE}` },
        },
        spec: {
          nodeName: local ? NODE : `node-${p % 25}`,
          containers: [{ name: 'c', image: 'x', ports: [{ name: 'http', containerPort: 8080 }] }],
        },
        status: { phase: 'Running', podIP: ip.v4, podIPs: [{ ip: ip.v4 }, { ip: ip.v6 }] },
      } as never);
    }
  }
}

/** Policy k: selects one local pod (by tier) of namespace k % 50 and allows a few peers, some by namespace. */
function policyObject(k: number): Record<string, unknown> {
  const namespace = `ns-${k % NAMESPACES}`;
  const from: unknown[] = [{ podSelector: { matchLabels: { app: `app-${k % APPS}` } } }];
  if (k % 5 === 0) from.push({ namespaceSelector: { matchLabels: { team: `t-${k % 5}` } }, podSelector: { matchLabels: { app: `app-${(k + 1) % APPS}` } } });
  if (k % 10 === 0) from.push({ ipBlock: { cidr: '192.168.0.0/16', except: ['192.168.1.0/24'] } });
  const spec: Record<string, unknown> = {
    podSelector: { matchLabels: { tier: `tier-${k % LOCAL_PER_NAMESPACE}` } },
    ingress: [{ from, ports: [{ port: 80 + (k % 7) }, { port: 'http' }] }],
  };
  if (k % 4 === 0) {
    spec.policyTypes = ['Ingress', 'Egress'];
    spec.egress = [{ to: [{ podSelector: { matchLabels: { app: `app-${(k + 2) % APPS}` } } }], ports: [{ port: 53, protocol: 'UDP' }] }];
  }
  return { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace, name: `policy-${k}` }, spec };
}

/** The set key of policy k's first ingress rule as policyObject writes it (every pod names port 8080 `http`). */
function firstRuleKey(k: number): string {
  return ruleSetKey({ index: 0, allPorts: false, ports: [{ protocol: 'TCP', port: 80 + (k % 7) }], namedPorts: [{ name: 'http', protocol: 'TCP' }] });
}

async function metricSum(enforcer: TestEnforcer, name: string): Promise<number> {
  const metric = enforcer.metrics.registry.getSingleMetric(name);
  const values = (await metric?.get())?.values ?? [];
  return values.find((value) => (value as { metricName?: string }).metricName === `${name}_sum`)?.value ?? 0;
}

async function inNetns(netns: string, command: string, args: string[], input?: string): Promise<string> {
  if (input === undefined) return (await run('ip', ['netns', 'exec', netns, command, ...args], { maxBuffer: 1 << 28 })).stdout;
  return new Promise((resolve, reject) => {
    const child = execFile('ip', ['netns', 'exec', netns, command, ...args], { maxBuffer: 1 << 28 }, (error, stdout) =>
      error ? reject(error) : resolve(stdout),
    );
    child.stdin?.end(input);
  });
}

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
    const round = index % LABEL_SCENARIOS;
    const k = (round * 37) % policyCount;
    const namespace = `ns-${k % NAMESPACES}`;
    // A remote pod of that namespace that the policy's first peer does not select yet.
    const p = 10 + round * 2 + ((k % APPS) === (10 + round * 2) % APPS ? 1 : 0);
    const ip = podIp(1 + (k % NAMESPACES) * PODS_PER_NAMESPACE + p).v4;
    const set = peerPodSetName(`${namespace}/policy-${k}`, 'ingress', firstRuleKey(k), 'ipv4');
    if (await inSet(netns, set, ip)) throw new Error(`bench setup: ${ip} already in ${set}`);
    const started = performance.now();
    api.patch('v1', 'Pod', namespace, `pod-${p}`, { metadata: { labels: { app: `app-${k % APPS}` } } }, 'merge');
    while (!(await inSet(netns, set, ip))) {
      if (performance.now() - started > 30_000) throw new Error('label change not enforced within 30 s');
    }
    samples.push(performance.now() - started);
    // Put the label back so that the next round starts from the same state.
    api.patch('v1', 'Pod', namespace, `pod-${p}`, { metadata: { labels: { app: `app-${p % APPS}` } } }, 'merge');
    while (await inSet(netns, set, ip)) await new Promise((resolve) => setTimeout(resolve, 5));
    // Let the minimum sync interval pass, so that every sample starts from an idle loop.
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return samples;
}

/** Starts the event-driven loop and lets its initial sync (a full re-read of the kernel) pass before measuring. */
async function startScheduler(enforcer: TestEnforcer): Promise<void> {
  enforcer.scheduler.start();
  while (enforcer.scheduler.syncs < 1) await new Promise((resolve) => setTimeout(resolve, 10));
}

const benchStart = performance.now();
const step = (what: string) => console.error(`[${((performance.now() - benchStart) / 1000).toFixed(1)} s] ${what}`);
const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
const ms = (value: number) => `${value.toFixed(0)} ms`;

async function main(): Promise<void> {
  const runner = new ExecRunner();
  const id = randomBytes(3).toString('hex');
  const netns = `krt-${id}-bench`;
  const bareNetns = `krt-${id}-bare`;
  const dir = await mkdtemp(join(tmpdir(), 'krt-bench-'));
  await addNetns(runner, netns);
  await addNetns(runner, bareNetns);
  const api = await startApiServer({ port: 0 });
  let enforcer: TestEnforcer | undefined;
  try {
    const kubeconfig = await api.writeKubeconfig();
    seedCluster(api);
    step('seeded');
    for (let k = 0; k < 500; k++) api.create(policyObject(k) as never);

    enforcer = await startTestEnforcer(
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
    for (let k = 500; k < 1000; k++) api.create(policyObject(k) as never);
    await enforcer.stop();
    await inNetns(netns, 'iptables', ['-F']);
    for (const tool of ['iptables', 'ip6tables']) {
      for (const chain of ['INPUT', 'FORWARD', 'OUTPUT']) await inNetns(netns, tool, ['-F', chain]);
      await inNetns(netns, tool, ['-F']);
      await inNetns(netns, tool, ['-X']);
    }
    await inNetns(netns, 'ipset', ['destroy']);

    enforcer = await startTestEnforcer(
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
      `netpol-iptables sync benchmark: ${NAMESPACES * PODS_PER_NAMESPACE} pods (${NAMESPACES * LOCAL_PER_NAMESPACE} on this node), 1000 policies, IPv4 + IPv6`,
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
