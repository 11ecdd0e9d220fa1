// Issue 35's soak: churn on a two-node lab with every plugin the lab runs (netpol-iptables, routing-bgp with
// route-sync, lballoc), pod traffic probed throughout, the agents' heap, RSS and descriptors sampled every 2 s, their
// processes and each node's kernel objects once a round. `soak.test.ts` runs it for 2 minutes in `npm test`; `npm run soak` (src/soak.ts)
// for as long as asked, printing its figures on the last line.
import { readFile } from 'node:fs/promises';
import { waitFor } from '@kube-router/testkit';
import { processesInNetns } from '../node-agent.js';
import { LabProcess, podsByName, type LabPod } from './lab-process.js';
import { HealthWatch, LIVENESS_FAILURE_THRESHOLD } from './node-health.js';
import { duplicates, nodeDataplane, type NodeDataplane } from './node-state.js';
import { PodProber, WEB_FROM_CLIENT_POLICY } from './pod-traffic.js';
import { TrafficProber } from './traffic-prober.js';

const NODES = ['lab-node-1', 'lab-node-2'] as const;
/** The entry point the lab runs on every node: the agent's process (LAB_AGENT_CLI's default). */
const AGENT_CLI = 'apps/agent/src/cli.ts';
/** Commands an agent runs for a moment during a sync: not processes it keeps, even when one outlives a listing. */
const TRANSIENT = /(^|\/)(iptables|ip6tables|iptables-restore|ip6tables-restore|iptables-save|ip6tables-save|iptables-nft|ip6tables-nft|iptables-legacy|ipset|ip|nft|conntrack|sysctl|bridge|env|modprobe|host-local|loopback|portmap|bandwidth|xtables-[a-z-]+-multi|(ip6?tables-(legacy|nft)-[a-z]+))\s/;
const MIB = 2 ** 20;

/** Cuts client->remote off (demo/remote takes no ingress at all) while it exists: a verdict that flips every round. */
const BLOCK_REMOTE_POLICY = `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: { name: soak-block-remote, namespace: demo }
spec:
  podSelector: { matchLabels: { app: remote } }
  policyTypes: [Ingress]
`;

/** A round's own objects: a pod on each node, a LoadBalancer Service over them and a policy opening them to demo. */
function roundManifest(round: number): string {
  const pods = NODES.map(
    (node, index) => `apiVersion: v1
kind: Pod
metadata: { name: soak-${round}-${index}, namespace: soak, labels: { app: soak, round: "${round}" } }
spec:
  nodeName: ${node}
  containers:
    - { name: app, image: registry.k8s.io/pause:3.10, ports: [{ containerPort: 8080, protocol: TCP }] }
`,
  );
  return [
    ...pods,
    `apiVersion: v1
kind: Service
metadata: { name: soak-${round}, namespace: soak }
spec:
  type: LoadBalancer
  ipFamilyPolicy: PreferDualStack
  selector: { app: soak, round: "${round}" }
  ports: [{ name: app, port: 8080, targetPort: 8080, protocol: TCP }]
`,
    `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: { name: soak-${round}, namespace: soak }
spec:
  podSelector: { matchLabels: { round: "${round}" } }
  ingress:
    - from: [{ namespaceSelector: { matchLabels: { team: demo } } }]
      ports: [{ port: 8080, protocol: TCP }]
`,
  ].join('---\n');
}

/** One node's agent from its /metrics, every couple of seconds through the soak. */
export interface MemorySample {
  at: number;
  /** `nodejs_heap_size_used_bytes`. */
  heapBytes: number;
  /** `process_resident_memory_bytes`. */
  rssBytes: number;
  /** `process_open_fds`. */
  fds: number;
  /** `process_start_time_seconds`: another value is another agent process (it crashed and was started again). */
  startTime: number;
  /** Major (mark-compact) collections so far, from `nodejs_gc_duration_seconds_count{kind="major"}`. */
  majorGcs: number;
}

/** One node at the end of a round, when the cluster is back to the soak's baseline. */
export interface NodeSample {
  at: number;
  /** Processes in the node's namespace that were there a second apart (the agent, gobgpd, its command helper). */
  processes: string[];
  /** Zombies in the node's namespace that were still zombies a second later: children nobody reaps. */
  zombies: number;
  /** Rules, sets and routes the agent programs (NodeDataplane's lines). */
  kernelObjects: number;
}

export interface SoakOptions {
  /** How long to churn after the lab is up. */
  durationMs: number;
  /** Samples taken before this much time has passed are the warm-up: caches filling, JIT, first allocations. */
  warmupMs: number;
  runId: string;
  /** 10.250.<subnet>.0/24 and its IPv6 twin: no other lab on the machine may use it. */
  subnet: number;
  /** Progress, one line per round. */
  log?: (line: string) => void;
}

export interface SoakReport {
  rounds: number;
  durationMs: number;
  probes: number;
  /** Probes whose verdict was not what the policies said at that moment. */
  wrong: string[];
  /** Probes that got no verdict at all. */
  probeErrors: string[];
  /** Per node, its agent's memory and descriptors after the warm-up. */
  memory: Record<string, MemorySample[]>;
  /** Per node, its processes and kernel objects at the end of each round after the warm-up. */
  samples: Record<string, NodeSample[]>;
  /** Per round, how long the kernels took to be back to the baseline after the round's objects were deleted. */
  backToBaselineMs: number[];
  /** Per round, from creating the round's pods to their policy enforced (demo in, other out) on both nodes. */
  newPodEnforcedMs: number[];
  /** Per round, from `kubectl apply` of the blocking policy to client->remote cut off, and from its deletion to open. */
  flipMs: number[];
  /** /healthz answers other than 200, or unanswered within its 1 s, per node (a kubelet restarts after 3 in a row). */
  livenessFailures: Record<string, number>;
  /** What the soak found wrong: empty when it held. */
  problems: string[];
  /** One line of figures. */
  summary: string;
}

const mib = (bytes: number) => (bytes / MIB).toFixed(1);
const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? Number.NaN : sorted[Math.floor((sorted.length - 1) / 2)]!;
};

/**
 * How a series' floor moved between the first and the last third of the samples after the warm-up: the heap climbs
 * between collections and drops at each, so its lows, not single samples or their median, show what is kept; a leak
 * raises them.
 */
export function growth(values: readonly number[]): number {
  if (values.length < 3) return 0;
  const third = Math.max(1, Math.floor(values.length / 3));
  return Math.min(...values.slice(-third)) - Math.min(...values.slice(0, third));
}

async function metricValues(metricsUrl: string): Promise<Map<string, number>> {
  const text = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(5_000) })).text();
  const values = new Map([...text.matchAll(/^([a-z_]+)(?:\{[^}]*\})? (\S+)$/gm)].map((match) => [match[1]!, Number(match[2])]));
  const majorGcs = /^nodejs_gc_duration_seconds_count\{[^}]*kind="major"[^}]*\} (\S+)$/m.exec(text);
  values.set('major_gcs', majorGcs ? Number(majorGcs[1]) : 0);
  return values;
}

function isZombie(pid: number): Promise<boolean> {
  return readFile(`/proc/${pid}/stat`, 'utf8').then(
    (stat) => stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z',
    () => false,
  );
}

export class Soak {
  readonly #options: SoakOptions;
  #lab: LabProcess | undefined;
  readonly #nodeNetns: (node: string) => string;
  #probers: PodProber[] = [];
  #traffic: TrafficProber | undefined;
  #health: HealthWatch | undefined;
  #baseline = new Map<string, NodeDataplane>();

  constructor(options: SoakOptions) {
    this.#options = options;
    const { runId } = options;
    this.#nodeNetns = (node) => `krt-${runId}-${node}`;
  }

  get lab(): LabProcess {
    if (this.#lab === undefined) throw new Error('the soak has not started');
    return this.#lab;
  }

  /** The lab up, the seeded pods running, web opened to client alone, and the baseline every round returns to. */
  async start(): Promise<void> {
    const { runId, subnet } = this.#options;
    const lab = (this.#lab = new LabProcess({ runId, underlayCidrs: [`10.250.${subnet}.0/24`, `fd00:10:250:${subnet.toString(16)}::/64`] }));
    await waitFor('both nodes ready', () => lab.stdout.filter((line) => / ready after /.test(line)).length === 2 || !lab.running, 240_000);
    if (!lab.running) throw new Error(`the lab ended: ${lab.stderr.slice(-30).join('\n')}`);
    await waitFor('the seeded pods to run', async () => (await lab.pods()).every((pod) => pod.status.phase === 'Running' && pod.status.podIP), 60_000);
    const pod = podsByName(await lab.pods());
    const client = new PodProber(pod('client').netns);
    const intruder = new PodProber(pod('intruder').netns);
    this.#probers = [client, intruder];
    const web = pod('web');
    const remote = pod('remote');
    await waitFor('client to reach remote across the nodes', () => client.connect(remote.ip, 8080), 60_000);
    await lab.kubectlApply(`apiVersion: v1\nkind: Namespace\nmetadata: { name: soak, labels: { team: soak } }\n`);
    await lab.kubectlApply(WEB_FROM_CLIENT_POLICY);
    await waitFor('the intruder to be cut off', async () => !(await intruder.connect(web.ip, 80)), 30_000);
    await waitFor(
      'the routes between the nodes, both families',
      async () => (await Promise.all(NODES.map(async (node) => (await nodeDataplane(this.#nodeNetns(node))).routes.length))).every((count) => count === 2),
      60_000,
    );
    // Both families' rules come in one sync; a moment for the other node's.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    for (const node of NODES) this.#baseline.set(node, await nodeDataplane(this.#nodeNetns(node)));

    this.#traffic = new TrafficProber(
      [
        { name: 'client->web', from: client, ip: web.ip, port: 80 },
        { name: 'intruder->web', from: intruder, ip: web.ip, port: 80 },
        { name: 'client->remote', from: client, ip: remote.ip, port: 8080 },
      ],
      { 'client->web': 'open', 'intruder->web': 'closed', 'client->remote': 'open' },
    );
    this.#traffic.start();
    this.#health = new HealthWatch(NODES.map((name, index) => ({ name, healthUrl: lab.healthUrls[index]! })));
    this.#health.start();
  }

  /** Churn rounds until the duration is up, then the report. */
  async run(): Promise<SoakReport> {
    const { durationMs, warmupMs, log } = this.#options;
    const traffic = this.#traffic!;
    const started = Date.now();
    const memory = this.#sampleMemory(started + warmupMs);
    const samples: Record<string, NodeSample[]> = Object.fromEntries(NODES.map((node) => [node, []]));
    const backToBaselineMs: number[] = [];
    const newPodEnforcedMs: number[] = [];
    const flipMs: number[] = [];
    const problems: string[] = [];
    let rounds = 0;
    try {
      while (Date.now() - started < durationMs) {
        rounds++;
        const round = await this.#round(rounds);
        backToBaselineMs.push(round.backToBaselineMs);
        newPodEnforcedMs.push(round.newPodEnforcedMs);
        flipMs.push(...round.flipMs);
        problems.push(...round.problems.map((problem) => `round ${rounds}: ${problem}`));
        for (const node of NODES) {
          const sample = await this.#sampleNode(node);
          if (Date.now() - started >= warmupMs) samples[node]!.push(sample);
        }
        log?.(
          `soak round ${rounds} at ${((Date.now() - started) / 1000).toFixed(0)} s: ` +
            NODES.map((node) => {
              const last = memory.series[node]!.at(-1);
              const processes = samples[node]!.at(-1)?.processes.length ?? '-';
              return last ? `${node} heap ${mib(last.heapBytes)} MiB rss ${mib(last.rssBytes)} MiB fds ${last.fds} processes ${processes}` : `${node} warming up`;
            }).join('; ') +
            `; back to baseline in ${round.backToBaselineMs} ms; wrong verdicts ${traffic.wrongSince(started).length}`,
        );
        if (problems.length > 0) break;
      }
    } finally {
      await memory.stop();
    }
    const finished = Date.now();
    const livenessFailures: Record<string, number> = {};
    for (const node of NODES) {
      const liveness = this.#health!.liveness(node, started, finished);
      livenessFailures[node] = liveness.notOk.length + liveness.unanswered;
      if (liveness.notOk.length > 0) problems.push(`${node}: /healthz answered ${liveness.notOk.map((sample) => sample.healthz).join(', ')}`);
      if (liveness.longestUnansweredRun >= LIVENESS_FAILURE_THRESHOLD) {
        problems.push(`${node}: /healthz unanswered ${liveness.longestUnansweredRun} times in a row: a kubelet would have restarted the agent`);
      }
    }
    const restarts = [...this.lab.stderr, ...this.lab.stdout].filter((line) => / was killed by .*starting it again/.test(line));
    if (restarts.length > 0) problems.push(`an agent died and was started again: ${restarts.join(' | ')}`);
    problems.push(...memory.problems, ...this.#flatness(memory.series, samples));
    const wrong = traffic.wrongSince(started);
    const probeErrors = traffic.errors.filter((error) => error.at >= started).map((error) => `${error.flow}: ${error.error}`);
    const probes = traffic.between(started, finished).length;
    const report: Omit<SoakReport, 'summary'> = {
      rounds,
      durationMs: finished - started,
      probes,
      wrong,
      probeErrors,
      memory: memory.series,
      samples,
      backToBaselineMs,
      newPodEnforcedMs,
      flipMs,
      livenessFailures,
      problems,
    };
    return { ...report, summary: summarize(report) };
  }

  /**
   * Each agent's /metrics every MEMORY_SAMPLE_MS from `from` on: often enough that every third of the soak holds
   * samples taken right after a collection, whose lows show what the heap keeps. A new start time is a new process.
   */
  #sampleMemory(from: number): { series: Record<string, MemorySample[]>; problems: string[]; stop: () => Promise<void> } {
    const series: Record<string, MemorySample[]> = Object.fromEntries(NODES.map((node) => [node, []]));
    const problems: string[] = [];
    let stopping = false;
    const loops = NODES.map(async (node, index) => {
      let startTime: number | undefined;
      while (!stopping) {
        const at = Date.now();
        try {
          const metrics = await metricValues(this.lab.metricsUrls[index]!);
          const value = (name: string) => {
            const found = metrics.get(name);
            if (found === undefined) throw new Error(`no ${name} in /metrics`);
            return found;
          };
          const sample = {
            at,
            heapBytes: value('nodejs_heap_size_used_bytes'),
            rssBytes: value('process_resident_memory_bytes'),
            fds: value('process_open_fds'),
            startTime: value('process_start_time_seconds'),
            majorGcs: value('major_gcs'),
          };
          if (startTime !== undefined && sample.startTime !== startTime) problems.push(`${node}: the agent process changed (started at ${startTime}, now ${sample.startTime})`);
          startTime = sample.startTime;
          if (at >= from) series[node]!.push(sample);
        } catch {
          // An agent that does not answer its metrics shows in /healthz, which the soak holds against it.
        }
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, MEMORY_SAMPLE_MS - (Date.now() - at))));
      }
    });
    return {
      series,
      problems,
      stop: async () => {
        stopping = true;
        await Promise.all(loops);
      },
    };
  }

  async stop(): Promise<number | null> {
    await this.#traffic?.stop();
    await this.#health?.stop();
    for (const prober of this.#probers) await prober.close();
    return this.#lab === undefined ? 0 : this.#lab.stop();
  }

  /**
   * One round: the round's pods, Service and policy, a label on each Node, and client->remote cut off; then each
   * checked in the kernel and by traffic; then all of it deleted and the kernels back to the baseline.
   */
  async #round(round: number): Promise<{ backToBaselineMs: number; newPodEnforcedMs: number; flipMs: number[]; problems: string[] }> {
    const lab = this.lab;
    const traffic = this.#traffic!;
    const [client, intruder] = this.#probers as [PodProber, PodProber];
    const problems: string[] = [];

    const applied = Date.now();
    traffic.expect('client->remote', 'either');
    await lab.kubectlApply(`${roundManifest(round)}---\n${BLOCK_REMOTE_POLICY}`);
    await lab.kubectl('label', 'nodes', '--all', `soak-round=${round}`, '--overwrite');
    const cut = await traffic.waitForVerdict('client->remote', 'closed', applied, 60_000);
    traffic.expect('client->remote', 'closed');

    // The round's pods: running, enforced on both nodes (demo in, other out), and their Service given an address.
    let roundPods: LabPod[] = [];
    await waitFor(
      `round ${round}'s pods to run`,
      async () => {
        roundPods = (await lab.pods()).filter((pod) => pod.metadata.namespace === 'soak');
        return roundPods.length === NODES.length && roundPods.every((pod) => pod.status.phase === 'Running' && pod.status.podIP);
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    await waitFor(
      `round ${round}'s policy on both nodes`,
      async () => {
        for (const pod of roundPods) {
          if (!(await client.connect(pod.status.podIP!, 8080)) || (await intruder.connect(pod.status.podIP!, 8080))) return false;
        }
        return true;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const enforced = Date.now();
    await waitFor(
      `round ${round}'s Service to get an address`,
      async () => {
        const service = JSON.parse(await lab.kubectl('get', 'service', '-n', 'soak', `soak-${round}`, '-o', 'json')) as {
          status?: { loadBalancer?: { ingress?: unknown[] } };
        };
        return (service.status?.loadBalancer?.ingress?.length ?? 0) > 0;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );

    const unblocked = Date.now();
    traffic.expect('client->remote', 'either');
    await lab.kubectl('delete', 'networkpolicy', '-n', 'demo', 'soak-block-remote');
    const opened = await traffic.waitForVerdict('client->remote', 'open', unblocked, 60_000);
    traffic.expect('client->remote', 'open');

    await lab.kubectl('delete', 'pods,services,networkpolicies', '--all', '-n', 'soak', '--wait=false');
    let backToBaselineMs = 0;
    try {
      backToBaselineMs = Math.round(
        await waitFor(
          `round ${round}: both nodes' kernels back to the baseline`,
          async () => {
            for (const node of NODES) {
              const state = await nodeDataplane(this.#nodeNetns(node));
              if (JSON.stringify(state) !== JSON.stringify(this.#baseline.get(node))) return false;
            }
            return true;
          },
          { timeoutMs: 60_000, intervalMs: 500 },
        ),
      );
    } catch (error) {
      for (const node of NODES) {
        const state = await nodeDataplane(this.#nodeNetns(node));
        const baseline = this.#baseline.get(node)!;
        const extra = [...state.rules, ...state.sets, ...state.routes].filter((line) => ![...baseline.rules, ...baseline.sets, ...baseline.routes].includes(line));
        const missing = [...baseline.rules, ...baseline.sets, ...baseline.routes].filter((line) => ![...state.rules, ...state.sets, ...state.routes].includes(line));
        problems.push(`${node}: ${(error as Error).message}; left: ${extra.slice(0, 5).join(' | ')}; missing: ${missing.slice(0, 5).join(' | ')}`);
      }
    }
    for (const node of NODES) {
      const twice = duplicates(await nodeDataplane(this.#nodeNetns(node)));
      if (twice.length > 0) problems.push(`${node}: applied twice: ${twice.join(', ')}`);
    }
    return { backToBaselineMs, newPodEnforcedMs: enforced - applied, flipMs: [cut - applied, opened - unblocked], problems };
  }

  /**
   * The node's long-lived processes and zombies, each from two listings a second apart (a tool a sync runs, or a child
   * not reaped yet, is gone by the second), and its kernel objects.
   */
  async #sampleNode(node: string): Promise<NodeSample> {
    const netns = this.#nodeNetns(node);
    const first = await processesInNetns(netns);
    const firstZombies = new Set((await Promise.all(first.map(async (process) => ((await isZombie(process.pid)) ? [process.pid] : [])))).flat());
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const second = await processesInNetns(netns);
    const stayed = second.filter(
      (process) => process.command !== '' && !TRANSIENT.test(`${process.command} `) && first.some((earlier) => earlier.pid === process.pid),
    );
    const zombies = (await Promise.all(second.filter((process) => firstZombies.has(process.pid)).map((process) => isZombie(process.pid)))).filter(Boolean).length;
    const state = await nodeDataplane(netns);
    return {
      at: Date.now(),
      processes: stayed
        .filter((process) => !(firstZombies.has(process.pid)))
        .map((process) => (process.command.includes(AGENT_CLI) ? 'agent' : process.command.split(' ').slice(0, 2).map((word) => word.split('/').at(-1)).join(' ')))
        .sort(),
      zombies,
      kernelObjects: state.rules.length + state.sets.length + state.routes.length,
    };
  }

  /**
   * Flat after the warm-up: descriptors and processes do not grow at all beyond a few a sync may hold open, no zombie
   * is left, and the heap and RSS move by less than a leak of one object per change would make them.
   */
  #flatness(memory: Record<string, MemorySample[]>, samples: Record<string, NodeSample[]>): string[] {
    const problems: string[] = [];
    for (const node of NODES) {
      const series = memory[node]!;
      if (series.length < 9) {
        problems.push(`${node}: ${series.length} memory samples after the warm-up, too few to tell`);
      } else {
        const heap = heapGrowth(series);
        const rss = growth(series.map((sample) => sample.rssBytes));
        const fds = growth(series.map((sample) => sample.fds));
        if (heap !== undefined && heap > FLATNESS.heapBytes) problems.push(`${node}: the heap's floor grew ${mib(heap)} MiB after the warm-up`);
        if (rss > FLATNESS.rssBytes) problems.push(`${node}: RSS's floor grew ${mib(rss)} MiB after the warm-up`);
        if (fds > FLATNESS.fds) problems.push(`${node}: open descriptors grew by ${fds} after the warm-up`);
      }
      const rounds = samples[node]!;
      const processSets = new Set(rounds.map((sample) => sample.processes.join(',')));
      if (processSets.size > 1) problems.push(`${node}: the processes changed: ${[...processSets].join(' / ')}`);
      const zombies = Math.max(0, ...rounds.map((sample) => sample.zombies));
      if (zombies > 0) problems.push(`${node}: ${zombies} zombie processes`);
      const objects = new Set(rounds.map((sample) => sample.kernelObjects));
      if (objects.size > 1) problems.push(`${node}: kernel objects at the baseline changed: ${[...objects].join(', ')}`);
    }
    return problems;
  }
}

/**
 * The heap's floor growth, or undefined when it cannot tell: the heap drops to what it keeps only at a major
 * collection, so the floors of the first and last thirds are compared only when each third saw one.
 */
export function heapGrowth(series: readonly MemorySample[]): number | undefined {
  const third = Math.floor(series.length / 3);
  if (third < 2) return undefined;
  const sawMajorGc = (part: readonly MemorySample[]) => part.at(-1)!.majorGcs > part[0]!.majorGcs;
  const first = series.slice(0, third);
  const last = series.slice(-third);
  if (!sawMajorGc(first) || !sawMajorGc(last)) return undefined;
  return growth(series.map((sample) => sample.heapBytes));
}

/** How often the agents' memory and descriptors are read. */
const MEMORY_SAMPLE_MS = 2_000;

/**
 * What "flat" allows, by the floors of the first and last thirds after the warm-up, sampled every 2 s. Between two
 * major collections the agents' heap climbs by 20 to 40 MiB (73 to 115 MiB in a 2-minute soak), so the floors, not
 * single samples, are compared, and only when each third saw a major collection (heapGrowth); the bound is above
 * what the floors move by without a leak; the long soak's figures (docs/reliability.md) show the trend. RSS also holds the allocator's free pages; a sync may hold a
 * few descriptors (a restore's pipes) when sampled. The agent's own leak test (apps/agent/src/memory-leak.test.ts)
 * bounds the heap after forced collections, much tighter.
 */
export const FLATNESS = { heapBytes: 32 * MIB, rssBytes: 64 * MIB, fds: 4 } as const;

function heapFigure(series: readonly MemorySample[]): string {
  const heap = heapGrowth(series);
  return heap === undefined ? 'not told: a third without a major collection' : `${mib(heap)} MiB`;
}

function summarize(report: Omit<SoakReport, 'summary'>): string {
  const span = (values: readonly number[]) =>
    values.length === 0 ? '-' : `${(median(values) / 1000).toFixed(1)} s median, ${(Math.max(...values) / 1000).toFixed(1)} s max`;
  const nodes = NODES.map((node) => {
    const series = report.memory[node]!;
    const rounds = report.samples[node]!;
    if (series.length === 0 || rounds.length === 0) return `${node}: no samples`;
    const first = series[0]!;
    const last = series.at(-1)!;
    const floor = (values: number[]) => mib(Math.min(...values));
    return (
      `${node}: heap ${floor(series.slice(0, 15).map((s) => s.heapBytes))} -> ${floor(series.slice(-15).map((s) => s.heapBytes))} MiB at its lows` +
      ` (floor growth ${heapFigure(series)}, ${series.length} samples, ${series.at(-1)!.majorGcs - series[0]!.majorGcs} major collections),` +
      ` RSS ${mib(first.rssBytes)} -> ${mib(last.rssBytes)} MiB (floor growth ${mib(growth(series.map((s) => s.rssBytes)))} MiB),` +
      ` fds ${first.fds} -> ${last.fds}, processes ${rounds.at(-1)!.processes.join('+')}, zombies ${Math.max(...rounds.map((s) => s.zombies))},` +
      ` kernel objects ${rounds[0]!.kernelObjects} -> ${rounds.at(-1)!.kernelObjects}, /healthz failures ${report.livenessFailures[node]}`
    );
  });
  return (
    `soak: ${(report.durationMs / 60_000).toFixed(1)} min, ${report.rounds} rounds (each: 2 pods, a LoadBalancer Service, 2 policies, 2 Node updates);` +
    ` probes ${report.probes}, wrong ${report.wrong.length}, without verdict ${report.probeErrors.length};` +
    ` new pods enforced ${span(report.newPodEnforcedMs)}; verdict flips ${span(report.flipMs)}; kernels back to baseline ${span(report.backToBaselineMs)};` +
    ` ${nodes.join('; ')}; problems ${report.problems.length}`
  );
}
