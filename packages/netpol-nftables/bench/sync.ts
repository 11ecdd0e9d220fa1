/**
 * Full-sync and event-to-enforced benchmark of the netpol nftables plugin against the real kernel, the embedded API
 * server (in processes of their own) and the plugin's informers, on the iptables benchmark's cluster: 5,000 pods (200 on this node), 1,000
 * policies, IPv4 + IPv6. In the same run: the bare `nft -f` of the same ruleset (and of its two tables at once), our
 * own transactions replayed by hand, and the iptables backend's full sync of the same cluster.
 *
 * The full syncs, the bare applies and the replays are interleaved, ROUNDS of each after a first round reported
 * apart, and every one of them writes into a network namespace of its own created for it, so each starts from the
 * same kernel state (an empty one with no table torn down just before: the kernel frees a deleted table's objects in
 * the background, on the same CPUs). The figures are medians.
 *
 *   npm run bench -w @kube-router/netpol-nftables
 *
 * Needs root, iproute2, nft, iptables and ipset.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { ControllerPlugin } from '@kube-router/controller';
import { addNetns, deleteNetns, ExecRunner } from '@kube-router/netfilter';
import { createNetpolIptablesPlugin } from '@kube-router/netpol-iptables';
import type { CommandResult, CommandRunner, CommandSpec } from '@kube-router/netfilter';
import { reportBench } from '@kube-router/testkit/bench';
import {
  BENCH_PROBE_LABEL,
  NETPOL_BENCH_CLUSTER,
  benchLabelChange,
  benchPolicy,
  benchProbeAnchor,
  benchProbeChange,
  benchProbePolicy,
  median,
  percentile,
  seedNetpolBenchCluster,
} from '@kube-router/testkit/netpol-conformance';
import { gauge, inNetns, metricSum, startScheduler, startTestEnforcer as startEnforcer, benchClock } from '@kube-router/netpol-testing';
import type { HarnessEnforcer as TestEnforcer, TestEnforcerOptions } from '@kube-router/netpol-testing';
import { nftablesBackend } from '../src/testing/backend.js';

const { node: NODE } = NETPOL_BENCH_CLUSTER;
const TABLES = ['ip kube-router-filter-ipv4', 'ip6 kube-router-filter-ipv6'];
/**
 * Full syncs, bare applies, replays and iptables full syncs, each this many times, interleaved (BENCH_ROUNDS), after a
 * first round that is reported on its own: the process's first sync runs code V8 has not optimized yet (as an agent's
 * first sync after a node boots does), and took 1.3 to 2.1 times the later rounds'. Nine, not five: on a machine of
 * two shared CPUs one round's full sync over its own bare apply ranged from 0.83 to 1.53, and a median of five moved
 * by 0.1 from one run to the next.
 */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);

/** This backend (or `extra.plugin`) as the agent assembles it. */
const startTestEnforcer = (env: { kubeconfig: string; nodeName: string; netns: string }, extra: TestEnforcerOptions) => startEnforcer(nftablesBackend, env, extra);

/**
 * Sees every `nft -f` the agent runs and tells when one that contains a line has committed: the moment a change is
 * enforced, without polling the kernel (each `nft` listing of a table this large costs more than the change itself).
 */
class CommitWatcher implements CommandRunner {
  readonly #inner = new ExecRunner();
  #waiters: { line: RegExp; resolve: () => void }[] = [];
  /** Every script the agent applied, in the order they committed. */
  readonly scripts: string[] = [];

  async run(spec: CommandSpec): Promise<CommandResult> {
    const result = await this.#inner.run(spec);
    if (spec.command === 'nft' && spec.input !== undefined) {
      const input = spec.input;
      this.scripts.push(input);
      const done = this.#waiters.filter((waiter) => waiter.line.test(input));
      this.#waiters = this.#waiters.filter((waiter) => !done.includes(waiter));
      for (const waiter of done) waiter.resolve();
    }
    return result;
  }

  committed(line: RegExp, timeoutMs = 30_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`not committed within ${timeoutMs} ms: ${line}`)), timeoutMs);
      this.#waiters.push({ line, resolve: () => (clearTimeout(timer), resolve()) });
    });
  }
}


const LABEL_ROUNDS = 20;
const LABEL_SCENARIOS = 5;

interface EventSamples {
  /** A remote pod joins the peers of the probe policy alone: every other policy is unrelated to the change. */
  probe: number[];
  /** The iptables bench's label change: the pod joins the peers of policy k and of every policy k + 100 j. */
  app: number[];
}

/**
 * The element change that enforces a pod's move in or out of a peer selection. Peer sets are named by their
 * selectors, not by policy: the pod's address going into or out of any peer set of the IPv4 table is the change. An
 * addition is written in the set's declaration; a removal is a `delete element`, or the refill of a small set (the
 * only set the restoring sync changes).
 */
function elementChange(verb: 'add' | 'delete', ip: string): RegExp {
  const address = ip.replaceAll('.', '\\.');
  const set = 'ip kube-router-filter-ipv4 KUBE-SRC-[0-9A-F]{16}';
  return new RegExp(
    verb === 'add' ? `^add set ${set} \\{ type ipv4_addr; elements = \\{ ${address} \\} \\}$` : `^(delete element ${set} \\{ ${address} \\}|flush set ${set})$`,
    'm',
  );
}

/** One round of each kind of event, from the API write to the commit of the nft transaction that enforces it. */
async function eventToEnforced(api: ApiServerProcess, watcher: CommitWatcher, policyCount: number, index: number): Promise<{ probe: number; app: number }> {
  const measure = async (pod: { namespace: string; pod: string; ip: string }, joined: Record<string, string>, left: Record<string, string>) => {
    const committed = watcher.committed(elementChange('add', pod.ip));
    const started = performance.now();
    api.labelPod(pod.namespace, pod.pod, joined).catch((error: unknown) => console.error(error));
    await committed;
    const elapsed = performance.now() - started;
    const restored = watcher.committed(elementChange('delete', pod.ip));
    api.labelPod(pod.namespace, pod.pod, left).catch((error: unknown) => console.error(error));
    await restored;
    // Past the minimum sync interval, so that every sample starts from an idle loop.
    await new Promise((resolve) => setTimeout(resolve, 100));
    return elapsed;
  };
  const probeMs = await measure(benchProbeChange(index), { [BENCH_PROBE_LABEL]: 'in' }, { [BENCH_PROBE_LABEL]: 'out' });
  const change = benchLabelChange(index % LABEL_SCENARIOS, policyCount);
  const appMs = await measure(change, { app: change.joined }, { app: change.own });
  return { probe: probeMs, app: appMs };
}

/** The cluster's objects, the probe policy and its anchor pod included, and the first `policies` bench policies. */
function benchObjects(policies: number): Record<string, unknown>[] {
  const objects: Record<string, unknown>[] = [];
  seedNetpolBenchCluster({ create: (object: Record<string, unknown>) => objects.push(object) } as never);
  const anchor = benchProbeAnchor();
  const pod = objects.find((object) => {
    const metadata = object.metadata as { namespace?: string; name?: string };
    return object.kind === 'Pod' && metadata.namespace === anchor.namespace && metadata.name === anchor.pod;
  });
  const metadata = pod?.metadata as { labels?: Record<string, string> } | undefined;
  if (!metadata) throw new Error('no probe anchor pod');
  metadata.labels = { ...metadata.labels, ...anchor.labels };
  objects.push(benchProbePolicy());
  for (let k = 0; k < policies; k++) objects.push(benchPolicy(k));
  return objects;
}

const API_SERVER_BIN = fileURLToPath(new URL('../../testkit/bin/apiserver.ts', import.meta.url));

/** The embedded API server (testkit's bin/apiserver.ts) in a child process, seeded from a file. */
class ApiServerProcess {
  private constructor(
    readonly url: string,
    readonly kubeconfig: string,
    readonly child: ChildProcess,
  ) {}

  static async start(objects: readonly object[], path: string): Promise<ApiServerProcess> {
    const seed = `${path}.seed.yaml`;
    const kubeconfig = `${path}.kubeconfig`;
    // JSON documents are YAML documents.
    await writeFile(seed, objects.map((object) => JSON.stringify(object)).join('\n---\n'));
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@kube-router/source', API_SERVER_BIN, '--port', '0', '--seed', seed, '--kubeconfig', kubeconfig], {
      cwd: fileURLToPath(new URL('.', import.meta.url)),
      // With an IPC channel the server stops when this process goes, even if it dies before it can close it.
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    child.channel?.unref();
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the API server did not start in time: ${output}`)), 120_000);
      child.stdout?.on('data', () => {
        const match = /listening on (http:\/\/\S+)/.exec(output);
        if (match && output.includes('kubeconfig written')) {
          clearTimeout(timer);
          resolve(match[1] as string);
        }
      });
      child.on('exit', (code) => reject(new Error(`the API server exited (${code}): ${output}`)));
    });
    return new ApiServerProcess(url, kubeconfig, child);
  }

  /** A merge patch of the pod's labels, as kubectl label would send it. */
  async labelPod(namespace: string, name: string, labels: Record<string, string>): Promise<void> {
    const response = await fetch(`${this.url}/api/v1/namespaces/${namespace}/pods/${name}`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ metadata: { labels } }),
    });
    if (!response.ok) throw new Error(`patch ${namespace}/${name}: ${response.status} ${await response.text()}`);
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill('SIGTERM');
    await exited;
  }
}

const { step, ms } = benchClock();
const list = (values: readonly number[]) => values.map((value) => value.toFixed(0)).join(', ');
const ENFORCER_OPTIONS = { minSyncIntervalMs: 50, syncTimeoutMs: 300_000 };

interface FullSync {
  totalMs: number;
  computeMs: number;
  applyMs: number;
  transactionMs: number;
  maxLoopDelayMs: number;
}

async function main(): Promise<void> {
  const runner = new ExecRunner();
  const id = randomBytes(2).toString('hex');
  const created: string[] = [];
  const freshNetns = async (role: string) => {
    const name = `nf${id}-${role}`;
    await addNetns(runner, name);
    created.push(name);
    return name;
  };
  // Two clusters that differ only in the policies beyond the first 500: events are measured on both in alternation,
  // so that whatever else the machine does at the time weighs on both alike.
  // Each API server runs in a process of its own, so that the agent's process holds what an agent holds (its peak RSS
  // and its garbage collector's work are the agent's, not those of two servers with 5,000 pods each).
  const workDir = await mkdtemp(join(tmpdir(), 'nft-bench-'));
  const servers: ApiServerProcess[] = [];
  const enforcers: TestEnforcer[] = [];
  let cleaning: Promise<void> | undefined;
  const cleanUp = () =>
    (cleaning ??= (async () => {
      for (const running of enforcers) await running.stop().catch(() => undefined);
      for (const server of servers) await server.close();
      await rm(workDir, { recursive: true, force: true });
      for (const name of created) await deleteNetns(runner, name).catch(() => undefined);
    })());
  // Interrupted, the bench still removes its namespaces and servers; its output cut short (`| head`) must not stop it
  // before it does.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void cleanUp().finally(() => process.exit(130)));
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);
  try {
    const [api, api500] = await Promise.all(
      ([1000, 500] as const).map((policies) => ApiServerProcess.start(benchObjects(policies), join(workDir, `api-${policies}`))),
    );
    if (!api || !api500) throw new Error('API servers did not start');
    servers.push(api, api500);
    const { kubeconfig } = api;
    const { kubeconfig: kubeconfig500 } = api500;
    step('seeded');
    const start = async (config: string, netns: string, commits: CommandRunner = new ExecRunner()) => {
      const started = await startTestEnforcer({ kubeconfig: config, nodeName: NODE, netns }, { options: ENFORCER_OPTIONS, scheduler: false, runner: commits });
      enforcers.push(started);
      return started;
    };
    const stop = async (stopped: TestEnforcer) => {
      await stopped.stop();
      enforcers.splice(enforcers.indexOf(stopped), 1);
    };

    // Full syncs by fresh agents, bare applies, replays and iptables full syncs, interleaved, with 1,000 policies: the
    // first round, then ROUNDS more.
    const full: FullSync[] = [];
    const bare: number[] = [];
    const bareParallel: number[] = [];
    const replay: number[] = [];
    const iptables: number[] = [];
    let ruleset = '';
    let tables: string[] = [];
    let script = '';
    let syncTransactions = 0;
    let syncNetns = '';
    let objects = { chains: 0, sets: 0, rules: 0 };
    let outcome: { ok: boolean; error?: unknown };
    for (let round = 0; round <= ROUNDS; round++) {
      const netns = await freshNetns(`s${round}`);
      const scripts = new CommitWatcher();
      const enforcer = await start(kubeconfig, netns, scripts);
      await enforcer.waitForInformers();
      const loopDelay = monitorEventLoopDelay({ resolution: 5 });
      loopDelay.enable();
      const started = performance.now();
      outcome = await enforcer.controller.runObservedSync('bench');
      const totalMs = performance.now() - started;
      loopDelay.disable();
      if (!outcome.ok) throw outcome.error;
      full.push({
        totalMs,
        computeMs: (await metricSum(enforcer, 'kube_router_netpol_compute_time')) * 1000,
        applyMs: (await metricSum(enforcer, 'kube_router_controller_policy_chains_sync_time')) * 1000,
        transactionMs: (await metricSum(enforcer, 'kube_router_netpol_nftables_transaction_time')) * 1000,
        maxLoopDelayMs: loopDelay.max / 1e6,
      });
      if (round === 0) {
        syncNetns = netns;
        // The sync's transactions (one per table) as one script.
        script = scripts.scripts.filter((input) => input.includes('add ')).join('');
        syncTransactions = scripts.scripts.length;
        tables = await Promise.all(TABLES.map((table) => inNetns(netns, 'nft', ['list', 'table', ...table.split(' ')])));
        ruleset = tables.join('\n');
        objects = {
          chains: await gauge(enforcer, 'kube_router_controller_policy_chains'),
          sets: await gauge(enforcer, 'kube_router_controller_policy_ipsets'),
          rules: await gauge(enforcer, 'kube_router_netpol_nftables_rules'),
        };
      }
      await stop(enforcer);

      // The same ruleset as nft lists it, applied bare: what one `nft -f` of it costs.
      const bareNetns = await freshNetns(`b${round}`);
      let applyStarted = performance.now();
      await inNetns(bareNetns, 'nft', ['-f', '-'], ruleset);
      bare.push(performance.now() - applyStarted);
      // The same two tables, each by an nft -f of its own, both at once: what the kernel allows at best.
      const parallelNetns = await freshNetns(`p${round}`);
      applyStarted = performance.now();
      await Promise.all(tables.map((table) => inNetns(parallelNetns, 'nft', ['-f', '-'], table)));
      bareParallel.push(performance.now() - applyStarted);
      // Our own full-sync transaction, replayed by hand: what nft takes for our script as written.
      const replayNetns = await freshNetns(`r${round}`);
      applyStarted = performance.now();
      await inNetns(replayNetns, 'nft', ['-f', '-'], script);
      replay.push(performance.now() - applyStarted);

      // The iptables backend on the same cluster, from an empty kernel of its own.
      const other = await startTestEnforcer(
        { kubeconfig, nodeName: NODE, netns: await freshNetns(`i${round}`) },
        { options: ENFORCER_OPTIONS, scheduler: false, plugin: createNetpolIptablesPlugin() as ControllerPlugin<unknown> },
      );
      enforcers.push(other);
      await other.waitForInformers();
      applyStarted = performance.now();
      outcome = await other.controller.runObservedSync('bench');
      iptables.push(performance.now() - applyStarted);
      await stop(other);
      if (!outcome.ok) throw outcome.error;
      step(`${round === 0 ? 'first round' : `round ${round} of ${ROUNDS}`}: full sync ${ms(totalMs)}, bare ${ms(bare.at(-1) ?? 0)}, replay ${ms(replay.at(-1) ?? 0)}, iptables ${ms(iptables.at(-1) ?? 0)}`);
    }

    // Event-driven syncs: an agent with 1,000 policies that adopts the first round's tables, one with 500.
    const watcher1000 = new CommitWatcher();
    const watcher500 = new CommitWatcher();
    const at1000Agent = await start(kubeconfig, syncNetns, watcher1000);
    const at500Agent = await start(kubeconfig500, await freshNetns('e500'), watcher500);
    for (const agent of [at1000Agent, at500Agent]) {
      outcome = await agent.syncNow();
      if (!outcome.ok) throw outcome.error;
    }
    const steadyStarted = performance.now();
    outcome = await at1000Agent.controller.runObservedSync('bench');
    const steadyMs = performance.now() - steadyStarted;
    if (!outcome.ok) throw outcome.error;
    const periodicDelay = monitorEventLoopDelay({ resolution: 5 });
    periodicDelay.enable();
    const periodicStarted = performance.now();
    outcome = await at1000Agent.controller.runObservedSync('periodic');
    const periodicMs = performance.now() - periodicStarted;
    periodicDelay.disable();
    if (!outcome.ok) throw outcome.error;
    await startScheduler(at1000Agent);
    await startScheduler(at500Agent);
    const at500: EventSamples = { probe: [], app: [] };
    const at1000: EventSamples = { probe: [], app: [] };
    // One round each first, not counted: an agent's first event runs code no sync has run yet (its first sample was
    // three times the others').
    for (const [server, watcher, policies] of [[api500, watcher500, 500], [api, watcher1000, 1000]] as const) {
      await eventToEnforced(server, watcher, policies, LABEL_ROUNDS);
    }
    for (let index = 0; index < LABEL_ROUNDS; index++) {
      for (const [server, watcher, samples, policies] of [[api500, watcher500, at500, 500], [api, watcher1000, at1000, 1000]] as const) {
        const round = await eventToEnforced(server, watcher, policies, index);
        samples.probe.push(round.probe);
        samples.app.push(round.app);
      }
    }
    step('events measured');

    // The first round apart from the others (see ROUNDS): the medians are of the rounds after it.
    const firstSync = full.shift() as FullSync;
    const firstBare = bare.shift() as number;
    const firstIptables = iptables.shift() as number;
    replay.shift();
    bareParallel.shift();
    const fullMs = median(full.map((f) => f.totalMs));
    const bareMs = median(bare);
    const replayMs = median(replay);
    const bareParallelMs = median(bareParallel);
    const iptablesMs = median(iptables);
    const peakRss = process.resourceUsage().maxRSS / 1024;
    // A full sync and the bare apply just after it see the same machine: their ratio moves less than either time.
    const roundRatios = full.map((f, round) => f.totalMs / (bare[round] as number));
    const roundRatio = median(roundRatios);
    const lines = [
      `netpol-nftables sync benchmark: 5000 pods (200 on this node), 1000 policies (and the probe policy), IPv4 + IPv6; medians of ${ROUNDS} interleaved rounds after a first one, each apply into a fresh network namespace`,
      `  kernel objects: ${objects.chains} chains, ${objects.sets} sets and maps, ${objects.rules} rules (2 tables)`,
      `  full sync from an empty kernel: ${ms(fullMs)} [${list(full.map((f) => f.totalMs))}] (compute: compile ${ms(median(full.map((f) => f.computeMs)))}; kernel apply, which renders each table as it builds its transaction, ${ms(median(full.map((f) => f.applyMs)))}; nft -f, the two tables summed, ${ms(median(full.map((f) => f.transactionMs)))})`,
      `  the full sync wrote ${syncTransactions} nft transactions: one per table, the two tables at once`,
      `  bare nft -f of the same ruleset (as nft lists it): ${ms(bareMs)} [${list(bare)}]; our full sync's transactions replayed by hand as one nft -f: ${ms(replayMs)} [${list(replay)}]`,
      `  ratio full sync / bare nft -f: ${(fullMs / bareMs).toFixed(2)}; each round's full sync over its own bare apply: ${roundRatio.toFixed(2)} [${roundRatios.map((r) => r.toFixed(2)).join(', ')}]  (replay / bare: ${(replayMs / bareMs).toFixed(2)})`,
      `  bare, each table by an nft -f of its own, both at once: ${ms(bareParallelMs)} [${list(bareParallel)}]; ratio full sync / that: ${(fullMs / bareParallelMs).toFixed(2)}`,
      `  iptables backend, full sync of the same cluster from an empty kernel: ${ms(iptablesMs)} [${list(iptables)}]; ratio nftables / iptables: ${(fullMs / iptablesMs).toFixed(2)}`,
      `  the process's first full sync (code not yet optimized, as after a node's boot): ${ms(firstSync.totalMs)} (compile ${ms(firstSync.computeMs)}), over its round's bare apply (${ms(firstBare)}): ${(firstSync.totalMs / firstBare).toFixed(2)}; the iptables backend's first: ${ms(firstIptables)}`,
      `  max event-loop delay during the full sync: ${ms(median(full.map((f) => f.maxLoopDelayMs)))}`,
      `  steady-state sync, nothing changed: ${ms(steadyMs)}; periodic sync (reads both tables back): ${ms(periodicMs)}, max event-loop delay ${ms(periodicDelay.max / 1e6)}`,
      `  event -> the nft transaction adding the element committed, ${LABEL_ROUNDS} rounds each after one not counted (median / p99):`,
      `    a pod joins the probe policy's peers (every other policy unrelated): ${ms(median(at500.probe))} / ${ms(percentile(at500.probe, 99))} with 500 policies, ${ms(median(at1000.probe))} / ${ms(percentile(at1000.probe, 99))} with 1000 (median ratio ${(median(at1000.probe) / median(at500.probe)).toFixed(2)})`,
      `    the iptables bench's app label change (5 of 500, 10 of 1000 policies select the pod): ${ms(median(at500.app))} / ${ms(percentile(at500.app, 99))} with 500, ${ms(median(at1000.app))} / ${ms(percentile(at1000.app, 99))} with 1000 (median ratio ${(median(at1000.app) / median(at500.app)).toFixed(2)})`,
      `  peak RSS ${peakRss.toFixed(0)} MiB (the bench process: the agents under test and the bare applies; the API servers run in processes of their own)`,
    ];
    console.log(lines.join('\n'));
    reportBench({
      plugin: 'netpol-nftables',
      figures: [
        { name: 'full sync / bare nft -f', value: fullMs / bareMs, unit: 'x', better: 'lower' },
        { name: 'full sync / bare nft -f of the same round', value: roundRatio, unit: 'x', better: 'lower' },
        { name: 'first full sync of the process / bare nft -f of its round', value: firstSync.totalMs / firstBare, unit: 'x', better: 'lower' },
        { name: 'full sync / iptables backend full sync', value: fullMs / iptablesMs, unit: 'x', better: 'lower' },
        { name: 'replayed transaction / bare nft -f', value: replayMs / bareMs, unit: 'x', better: 'lower' },
        { name: 'full sync / bare nft -f per table at once', value: fullMs / bareParallelMs, unit: 'x', better: 'lower' },
        { name: 'event to enforced, 1000 / 500 unrelated policies', value: median(at1000.probe) / median(at500.probe), unit: 'x', better: 'lower' },
        { name: 'full sync', value: fullMs, unit: 'ms', better: 'lower' },
        { name: 'full sync compute', value: median(full.map((f) => f.computeMs)), unit: 'ms', better: 'lower' },
        { name: 'bare nft -f', value: bareMs, unit: 'ms', better: 'lower' },
        { name: 'steady-state sync', value: steadyMs, unit: 'ms', better: 'lower' },
        { name: 'event to enforced median, 500 policies', value: median(at500.probe), unit: 'ms', better: 'lower' },
        { name: 'event to enforced p99, 500 policies', value: percentile(at500.probe, 99), unit: 'ms', better: 'lower' },
        { name: 'event to enforced median, 1000 policies', value: median(at1000.probe), unit: 'ms', better: 'lower' },
        { name: 'event to enforced p99, 1000 policies', value: percentile(at1000.probe, 99), unit: 'ms', better: 'lower' },
        { name: 'app label change median, 1000 policies', value: median(at1000.app), unit: 'ms', better: 'lower' },
        { name: 'kernel rules', value: objects.rules, unit: 'rules', better: 'lower' },
        { name: 'peak RSS', value: peakRss, unit: 'MiB', better: 'lower' },
      ],
    }, { log: false });
  } finally {
    await cleanUp();
  }
}

try {
  await main();
} catch (error) {
  console.error(error);
  process.exitCode = 1;
}
