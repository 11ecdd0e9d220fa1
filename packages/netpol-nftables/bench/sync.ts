/**
 * Full-sync and event-to-enforced benchmark of the netpol nftables plugin against the real kernel (fresh network
 * namespaces), the embedded API server and the plugin's informers, on the iptables benchmark's cluster: 5,000 pods
 * (200 on this node), 1,000 policies, IPv4 + IPv6. In the same run: the bare `nft -f` of the same ruleset, and the
 * iptables backend's full sync of the same cluster.
 *
 *   npm run bench -w @kube-router/netpol-nftables
 *
 * Needs root, iproute2, nft, iptables and ipset.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { promisify } from 'node:util';
import type { ControllerPlugin } from '@kube-router/controller';
import { addNetns, deleteNetns, ExecRunner } from '@kube-router/netfilter';
import type { CommandResult, CommandRunner, CommandSpec } from '@kube-router/netfilter';
import { createNetpolIptablesPlugin } from '@kube-router/netpol-iptables';
import { startApiServer } from '@kube-router/testkit';
import type { ApiServer } from '@kube-router/testkit';
import { ruleSetKey, ruleSetName } from '../src/names.js';
import { startTestEnforcer } from '../src/testing/enforcer.js';
import type { TestEnforcer } from '../src/testing/enforcer.js';

const run = promisify(execFile);
const NODE = 'bench-node';
const NAMESPACES = 50;
const PODS_PER_NAMESPACE = 100;
const LOCAL_PER_NAMESPACE = 4;
const APPS = 20;
const TABLES = ['ip kube-router-filter-ipv4', 'ip6 kube-router-filter-ipv6'];

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
        metadata: { namespace: `ns-${n}`, name: `pod-${p}`, labels: { app: `app-${p % APPS}`, tier: `tier-${p % LOCAL_PER_NAMESPACE}` } },
        spec: {
          nodeName: local ? NODE : `node-${p % 25}`,
          containers: [{ name: 'c', image: 'x', ports: [{ name: 'http', containerPort: 8080 }] }],
        },
        status: { phase: 'Running', podIP: ip.v4, podIPs: [{ ip: ip.v4 }, { ip: ip.v6 }] },
      } as never);
    }
  }
}

/** Policy k, as in the iptables benchmark: one local pod (by tier) of namespace k % 50, a few peers, some by namespace. */
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

function firstRuleKey(k: number): string {
  return ruleSetKey({ index: 0, allPorts: false, ports: [{ protocol: 'TCP', port: 80 + (k % 7) }], namedPorts: [{ name: 'http', protocol: 'TCP' }] });
}

async function metricSum(enforcer: TestEnforcer, name: string): Promise<number> {
  const values = (await enforcer.metrics.registry.getSingleMetric(name)?.get())?.values ?? [];
  return values.find((value) => (value as { metricName?: string }).metricName === `${name}_sum`)?.value ?? 0;
}

async function gauge(enforcer: TestEnforcer, name: string): Promise<number | undefined> {
  return (await enforcer.metrics.registry.getSingleMetric(name)?.get())?.values[0]?.value;
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

/**
 * Sees every `nft -f` the agent runs and tells when one that contains a line has committed: the moment a change is
 * enforced, without polling the kernel (each `nft` listing of a table this large costs more than the change itself).
 */
class CommitWatcher implements CommandRunner {
  readonly #inner = new ExecRunner();
  #waiters: { line: string; resolve: () => void }[] = [];
  /** The largest script the agent applied: the full sync's transaction. */
  largest = '';

  async run(spec: CommandSpec): Promise<CommandResult> {
    const result = await this.#inner.run(spec);
    if (spec.command === 'nft' && spec.input !== undefined) {
      const input = spec.input;
      if (input.length > this.largest.length) this.largest = input;
      const done = this.#waiters.filter((waiter) => input.includes(waiter.line));
      this.#waiters = this.#waiters.filter((waiter) => !done.includes(waiter));
      for (const waiter of done) waiter.resolve();
    }
    return result;
  }

  committed(line: string, timeoutMs = 30_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`not committed within ${timeoutMs} ms: ${line}`)), timeoutMs);
      this.#waiters.push({ line, resolve: () => (clearTimeout(timer), resolve()) });
    });
  }
}

const LABEL_ROUNDS = 20;
const LABEL_SCENARIOS = 5;

/** From a label change of one remote pod to the commit that adds its address to the peer set of the policy. */
async function labelChangeToEnforced(api: ApiServer, watcher: CommitWatcher, policyCount: number): Promise<number[]> {
  const samples: number[] = [];
  for (let index = 0; index < LABEL_ROUNDS; index++) {
    const round = index % LABEL_SCENARIOS;
    const k = (round * 37) % policyCount;
    const namespace = `ns-${k % NAMESPACES}`;
    const p = 10 + round * 2 + ((k % APPS) === (10 + round * 2) % APPS ? 1 : 0);
    const ip = podIp(1 + (k % NAMESPACES) * PODS_PER_NAMESPACE + p).v4;
    const set = ruleSetName(`${namespace}/policy-${k}`, 'ingress', firstRuleKey(k), 'pods', 'ipv4');
    const added = watcher.committed(`add element ip kube-router-filter-ipv4 ${set} { ${ip} }`);
    const started = performance.now();
    api.patch('v1', 'Pod', namespace, `pod-${p}`, { metadata: { labels: { app: `app-${k % APPS}` } } }, 'merge');
    await added;
    samples.push(performance.now() - started);
    const removed = watcher.committed(`delete element ip kube-router-filter-ipv4 ${set} { ${ip} }`);
    api.patch('v1', 'Pod', namespace, `pod-${p}`, { metadata: { labels: { app: `app-${p % APPS}` } } }, 'merge');
    await removed;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return samples;
}

async function startScheduler(enforcer: TestEnforcer): Promise<void> {
  enforcer.scheduler.start();
  while (enforcer.scheduler.syncs < 1) await new Promise((resolve) => setTimeout(resolve, 10));
}

const benchStart = performance.now();
const step = (what: string) => console.error(`[${((performance.now() - benchStart) / 1000).toFixed(1)} s] ${what}`);
const percentile = (values: readonly number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
};
const ms = (value: number) => `${value.toFixed(0)} ms`;
const ENFORCER_OPTIONS = { minSyncIntervalMs: 50, syncTimeoutMs: 300_000 };

async function main(): Promise<void> {
  const runner = new ExecRunner();
  const id = `tnf${randomBytes(2).toString('hex').slice(0, 3)}`;
  const netns = `krt-${id}-bench`;
  const bareNetns = `krt-${id}-bare`;
  const iptablesNetns = `krt-${id}-ipt`;
  for (const name of [netns, bareNetns, iptablesNetns]) await addNetns(runner, name);
  const api = await startApiServer({ port: 0 });
  let enforcer: TestEnforcer | undefined;
  try {
    const kubeconfig = await api.writeKubeconfig();
    seedCluster(api);
    for (let k = 0; k < 500; k++) api.create(policyObject(k) as never);
    step('seeded');

    // Phase 1: 500 policies, then label changes.
    const watcher = new CommitWatcher();
    enforcer = await startTestEnforcer({ kubeconfig, nodeName: NODE, netns }, { options: ENFORCER_OPTIONS, scheduler: false, runner: watcher });
    let outcome = await enforcer.syncNow();
    if (!outcome.ok) throw outcome.error;
    step('first sync with 500 policies done');
    await startScheduler(enforcer);
    const at500 = await labelChangeToEnforced(api, watcher, 500);
    step('label changes with 500 policies measured');

    // Phase 2: 1,000 policies; a fresh agent does the full sync from an empty kernel.
    for (let k = 500; k < 1000; k++) api.create(policyObject(k) as never);
    await enforcer.stop();
    for (const table of TABLES) await inNetns(netns, 'nft', ['delete', 'table', ...table.split(' ')]);
    enforcer = await startTestEnforcer({ kubeconfig, nodeName: NODE, netns }, { options: ENFORCER_OPTIONS, scheduler: false, runner: watcher });
    await enforcer.waitForInformers();
    const loopDelay = monitorEventLoopDelay({ resolution: 5 });
    loopDelay.enable();
    const fullStarted = performance.now();
    outcome = await enforcer.controller.runObservedSync('bench');
    const fullMs = performance.now() - fullStarted;
    loopDelay.disable();
    if (!outcome.ok) throw outcome.error;
    step('full sync with 1000 policies done');
    const computeMs = (await metricSum(enforcer, 'kube_router_netpol_compute_time')) * 1000;
    const applyMs = (await metricSum(enforcer, 'kube_router_controller_policy_chains_sync_time')) * 1000;
    const listMs = (await metricSum(enforcer, 'kube_router_netpol_nftables_list_time')) * 1000;
    const transactionMs = (await metricSum(enforcer, 'kube_router_netpol_nftables_transaction_time')) * 1000;
    const chains = await gauge(enforcer, 'kube_router_controller_policy_chains');
    const sets = await gauge(enforcer, 'kube_router_controller_policy_ipsets');
    const rules = await gauge(enforcer, 'kube_router_netpol_nftables_rules');

    // The same ruleset applied bare: what one `nft -f` of it costs.
    const ruleset = (await Promise.all(TABLES.map((table) => inNetns(netns, 'nft', ['list', 'table', ...table.split(' ')])))).join('\n');
    const bareStarted = performance.now();
    await inNetns(bareNetns, 'nft', ['-f', '-'], ruleset);
    const bareMs = performance.now() - bareStarted;
    // Our own transaction, replayed by hand into empty tables: what nft takes for our script as written.
    for (const table of TABLES) await inNetns(bareNetns, 'nft', ['delete', 'table', ...table.split(' ')]);
    const replayStarted = performance.now();
    await inNetns(bareNetns, 'nft', ['-f', '-'], watcher.largest);
    const replayMs = performance.now() - replayStarted;
    step('bare nft -f done');

    const steadyStarted = performance.now();
    outcome = await enforcer.controller.runObservedSync('bench');
    const steadyMs = performance.now() - steadyStarted;
    if (!outcome.ok) throw outcome.error;
    const periodicStarted = performance.now();
    outcome = await enforcer.controller.runObservedSync('periodic');
    const periodicMs = performance.now() - periodicStarted;
    if (!outcome.ok) throw outcome.error;

    await startScheduler(enforcer);
    const at1000 = await labelChangeToEnforced(api, watcher, 1000);
    step('label changes with 1000 policies measured');
    await enforcer.stop();
    enforcer = undefined;

    // The iptables backend on the same cluster, from an empty kernel of its own.
    const iptables = await startTestEnforcer(
      { kubeconfig, nodeName: NODE, netns: iptablesNetns },
      { options: ENFORCER_OPTIONS, scheduler: false, plugin: createNetpolIptablesPlugin() as ControllerPlugin<unknown> },
    );
    await iptables.waitForInformers();
    const iptablesStarted = performance.now();
    outcome = await iptables.controller.runObservedSync('bench');
    const iptablesMs = performance.now() - iptablesStarted;
    await iptables.stop();
    if (!outcome.ok) throw outcome.error;
    step('iptables full sync done');

    const usage = process.resourceUsage();
    const lines = [
      `netpol-nftables sync benchmark: ${NAMESPACES * PODS_PER_NAMESPACE} pods (${NAMESPACES * LOCAL_PER_NAMESPACE} on this node), 1000 policies, IPv4 + IPv6`,
      `  kernel objects: ${chains} chains, ${sets} sets and maps, ${rules} rules (2 tables)`,
      `  full sync from an empty kernel: ${ms(fullMs)} (compute: compile + render ${ms(computeMs)}; kernel apply ${ms(applyMs)}, of which nft -f ${ms(transactionMs)} and reading the tables back ${ms(listMs)})`,
      `  bare nft -f of the same ruleset (as nft lists it): ${ms(bareMs)}; our full-sync transaction replayed by hand: ${ms(replayMs)}`,
      `  ratio full sync / bare nft -f: ${(fullMs / bareMs).toFixed(2)}  (apply only / bare: ${(applyMs / bareMs).toFixed(2)})`,
      `  iptables backend, full sync of the same cluster from an empty kernel: ${ms(iptablesMs)}; ratio nftables / iptables: ${(fullMs / iptablesMs).toFixed(2)}`,
      `  max event-loop delay during the full sync: ${ms(loopDelay.max / 1e6)} (p99 ${ms(loopDelay.percentile(99) / 1e6)})`,
      `  steady-state sync, nothing changed: ${ms(steadyMs)}; periodic sync (reads both tables back): ${ms(periodicMs)}`,
      `  pod label change -> the nft transaction adding the element committed, ${LABEL_ROUNDS} rounds: median ${ms(percentile(at500, 50))}, p99 ${ms(percentile(at500, 99))} with 500 policies; median ${ms(percentile(at1000, 50))}, p99 ${ms(percentile(at1000, 99))} with 1000 policies (median ratio ${(percentile(at1000, 50) / percentile(at500, 50)).toFixed(2)})`,
      `  peak RSS ${(usage.maxRSS / 1024).toFixed(0)} MiB (the embedded API server with 5000 pods runs in the same process)`,
    ];
    console.log(lines.join('\n'));
  } finally {
    await enforcer?.stop().catch(() => undefined);
    await api.close();
    for (const name of [netns, bareNetns, iptablesNetns]) await deleteNetns(runner, name).catch(() => undefined);
  }
}

try {
  await main();
} catch (error) {
  console.error(error);
  process.exitCode = 1;
}
