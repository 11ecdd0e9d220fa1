/**
 * The agent under measurement: the reference CLI (firewall only, netpol-iptables, unless told other features), in its
 * own process inside its own network namespace, reaching an API server in the measuring process over a veth pair. The
 * process is started with --expose-gc and a preload that collects garbage on SIGUSR2 and prints the heap that is
 * left, so that memory is read as what is live, not as whatever the collector has not got round to.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFile, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { addNetns, deleteNetns, ExecRunner, killNetnsProcesses } from '@kube-router/netfilter';
import { FEATURES, type Feature } from '../flags.js';

const AGENT_CLI = fileURLToPath(new URL('../cli.ts', import.meta.url));
const GC_PRELOAD = fileURLToPath(new URL('./gc-on-signal.mjs', import.meta.url));
const AGENT_DIR = fileURLToPath(new URL('../../', import.meta.url));
const HEALTH_PORT = 20244;
const METRICS_PORT = 20245;
const KEPT_LOG_LINES = 40;

export const runner = new ExecRunner({ defaultTimeoutMs: 120_000 });

/** A network namespace joined to this one by a veth pair with a /30 on it: the agent's node. Names start `sc`. */
export interface ScaleNetns {
  name: string;
  /** This side's address, where the API server listens for the agent. */
  hostIp: string;
  /** The namespace's address, where the agent's health and metrics servers answer. */
  netnsIp: string;
  remove(): Promise<void>;
}

export async function createScaleNetns(id = randomBytes(3).toString('hex')): Promise<ScaleNetns> {
  const name = `sc-${id}`;
  const hostLink = `sc${id}h`;
  const netnsLink = `sc${id}a`;
  // A /30 out of 10.253.0.0/16 picked from the id, so that two runs at once do not take the same one.
  const base = (Number.parseInt(id, 16) % 16_384) * 4;
  const address = (offset: number) => `10.253.${((base + offset) >> 8) & 255}.${(base + offset) & 255}`;
  const [hostIp, netnsIp] = [address(1), address(2)];
  const remove = async () => {
    await killNetnsProcesses(runner, name);
    await runner.run({ command: 'ip', args: ['link', 'del', hostLink], okExitCodes: [1] }).catch(() => undefined);
    await deleteNetns(runner, name).catch(() => undefined);
  };
  try {
    await addNetns(runner, name);
    await runner.run({ command: 'ip', args: ['link', 'add', hostLink, 'type', 'veth', 'peer', 'name', netnsLink, 'netns', name] });
    await runner.run({ command: 'ip', args: ['addr', 'add', `${hostIp}/30`, 'dev', hostLink] });
    await runner.run({ command: 'ip', args: ['link', 'set', hostLink, 'up'] });
    await runner.run({ command: 'ip', args: ['addr', 'add', `${netnsIp}/30`, 'dev', netnsLink], netns: name });
    await runner.run({ command: 'ip', args: ['link', 'set', netnsLink, 'up'], netns: name });
    await runner.run({ command: 'ip', args: ['link', 'set', 'lo', 'up'], netns: name });
  } catch (error) {
    await remove();
    throw error;
  }
  return { name, hostIp, netnsIp, remove };
}

/** The --run-* features an agent under measurement runs, by the flag's feature name. */
export type MeasuredFeatures = Partial<Record<Feature, boolean>>;

export interface MeasuredAgentOptions {
  /** A file from bundleAgent to run with plain node; without it the agent runs from source through tsx. */
  bundle?: string;
  /**
   * The CLI entry to run from source instead of src/cli.ts (e.g. testing/cli-with-stand-ins.ts); a `bundle` made
   * from it (bundleAgent's `entry`) runs it bundled.
   */
  entry?: string;
  /** The features to run; default the firewall alone. Those left out run with --run-<feature>=false. */
  features?: MeasuredFeatures;
  /** Flags after the defaults (a flag given twice takes its last value). */
  extraFlags?: readonly string[];
  /** Options of node itself, e.g. `--cpu-prof`. */
  nodeOptions?: readonly string[];
  /** Environment variables beside the measuring process's own. */
  env?: Readonly<Record<string, string>>;
}

/** One netpol sync as the agent logs it at -v=1: 'netpol sync applied' (compute and total) and 'sync ended'. */
export interface LoggedSync {
  reason: string;
  durationMs: number;
  computeMs?: number;
}

/** What the preload prints after a full collection: heap and RSS right then. */
export interface AfterGc {
  heapUsedBytes: number;
  rssBytes: number;
}

export class MeasuredAgent {
  readonly netns: ScaleNetns;
  readonly startedAt = performance.now();
  readonly exited: Promise<number | string>;
  readonly #child: ChildProcess;
  readonly #logs: string[] = [];
  /** The netpol syncs that ended, in order (the agent runs at -v=1 for these lines). */
  readonly syncs: LoggedSync[] = [];
  #lastComputeMs: number | undefined;
  #gcWaiters: ((reading: AfterGc) => void)[] = [];
  #exit: number | string | undefined;

  /** Without a bundle the agent runs from source through tsx, as the lab and the tests run it. */
  constructor(netns: ScaleNetns, kubeconfig: string, options: MeasuredAgentOptions = {}) {
    const { bundle, extraFlags = [], nodeOptions = [], features = { firewall: true } } = options;
    const entry = bundle ? [bundle] : ['--conditions=@kube-router/source', '--import', 'tsx', options.entry ?? AGENT_CLI];
    this.netns = netns;
    const flags = [
      ...FEATURES.map((feature) => `--run-${feature}=${features[feature] === true}`),
      `--kubeconfig=${kubeconfig}`,
      '--hostname-override=sc-node',
      '--enable-ipv6=true',
      `--health-port=${HEALTH_PORT}`,
      `--metrics-port=${METRICS_PORT}`,
      // Syncs come from events; no periodic full sync lands in the middle of a measurement.
      '--iptables-sync-period=1h',
      '--cache-sync-timeout=10m',
      // Debug logs carry each sync's duration and compute time.
      '-v=1',
      ...extraFlags,
    ];
    this.#child = spawn(
      'ip',
      ['netns', 'exec', netns.name, process.execPath, ...nodeOptions, '--expose-gc', '--import', GC_PRELOAD, ...entry, ...flags],
      { cwd: AGENT_DIR, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, POD_NAME: 'sc-agent', POD_NAMESPACE: 'kube-system', ...options.env } },
    );
    createInterface({ input: this.#child.stdout! }).on('line', (line) => this.#onLogLine(line));
    createInterface({ input: this.#child.stderr! }).on('line', (line) => {
      const reading = parseAfterGc(line);
      if (reading) for (const resolve of this.#gcWaiters.splice(0)) resolve(reading);
      else this.#keep(line);
    });
    // Should the measuring process die without stopping the agent, the agent must not outlive it.
    const killOnExit = () => killGroup(this.pid);
    process.once('exit', killOnExit);
    this.exited = new Promise((resolve) => {
      this.#child.once('error', (error) => resolve((this.#exit = `spawn failed: ${error.message}`)));
      this.#child.once('exit', (code, signal) => {
        process.off('exit', killOnExit);
        resolve((this.#exit = code ?? signal ?? 'unknown'));
      });
    });
  }

  get pid(): number {
    return this.#child.pid!;
  }

  get url(): string {
    return `http://${this.netns.netnsIp}`;
  }

  get running(): boolean {
    return this.#exit === undefined;
  }

  /** The process's peak RSS so far (VmHWM), which no scrape can miss. */
  async peakRssBytes(): Promise<number> {
    const status = await readFile(`/proc/${this.pid}/status`, 'utf8');
    const kib = /^VmHWM:\s+(\d+) kB$/m.exec(status)?.[1];
    if (kib === undefined) throw new Error(`no VmHWM in /proc/${this.pid}/status`);
    return Number(kib) * 1024;
  }

  /** Resolves once /metrics answers (the agent's modules are loaded and its servers listen), with that scrape. */
  async waitForMetrics(timeoutMs: number): Promise<Map<string, number>> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      if (this.#exit !== undefined) throw new Error(`the agent exited (${this.#exit}) before /metrics answered:\n${this.recentLogs()}`);
      try {
        return await this.metrics();
      } catch {
        // not listening yet
      }
      if (performance.now() > deadline) throw new Error(`/metrics did not answer within ${timeoutMs} ms:\n${this.recentLogs()}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** The last lines the agent wrote, for an error message. */
  recentLogs(): string {
    return this.#logs.join('\n');
  }

  /** Resolves once /readyz answers 200 (informers synced, first sync done); the time since the process started. */
  async waitUntilReady(timeoutMs: number): Promise<number> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      if (this.#exit !== undefined) throw new Error(`the agent exited (${this.#exit}) before it was ready:\n${this.recentLogs()}`);
      try {
        const response = await fetch(`${this.url}:${HEALTH_PORT}/readyz`, { signal: AbortSignal.timeout(2_000) });
        await response.body?.cancel();
        if (response.status === 200) return performance.now() - this.startedAt;
      } catch {
        // not listening yet, or busy
      }
      if (performance.now() > deadline) throw new Error(`the agent was not ready within ${timeoutMs} ms:\n${this.recentLogs()}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** The agent's /metrics, as `name{labels}` -> value. */
  async metrics(): Promise<Map<string, number>> {
    const response = await fetch(`${this.url}:${METRICS_PORT}/metrics`, { signal: AbortSignal.timeout(30_000) });
    if (response.status !== 200) throw new Error(`/metrics answered ${response.status}`);
    return parsePrometheusText(await response.text());
  }

  /** A full collection in the agent, then its heap and RSS. */
  async afterGc(timeoutMs = 30_000): Promise<AfterGc> {
    const reading = new Promise<AfterGc>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the agent did not report after SIGUSR2')), timeoutMs);
      this.#gcWaiters.push((value) => {
        clearTimeout(timer);
        resolve(value);
      });
    });
    process.kill(this.pid, 'SIGUSR2');
    return reading;
  }

  /** SIGTERM, then its whole process group after `graceMs`. */
  async stop(graceMs = 20_000): Promise<void> {
    if (this.#exit === undefined) {
      this.#child.kill('SIGTERM');
      const timer = setTimeout(() => killGroup(this.pid), graceMs);
      await this.exited;
      clearTimeout(timer);
    }
    killGroup(this.pid);
  }

  #onLogLine(line: string): void {
    if (line.includes('"sync ended"') || line.includes('"netpol sync applied"')) {
      const entry = JSON.parse(line) as { msg: string; controller?: string; reason: string; durationMs?: number; computeMs?: number };
      if (entry.msg === 'netpol sync applied') this.#lastComputeMs = entry.computeMs;
      else if (entry.msg === 'sync ended' && entry.controller === 'netpol') {
        this.syncs.push({ reason: entry.reason, durationMs: entry.durationMs ?? Number.NaN, ...(this.#lastComputeMs !== undefined && { computeMs: this.#lastComputeMs }) });
        this.#lastComputeMs = undefined;
      }
      return;
    }
    this.#keep(line);
  }

  #keep(line: string): void {
    this.#logs.push(line);
    if (this.#logs.length > KEPT_LOG_LINES) this.#logs.shift();
  }
}

/**
 * Bundles apps/agent/src/cli.ts (or another CLI `entry`) and everything it imports into one ES module under `dir`
 * (with a copy of the agent's package.json beside it, which the CLI reads for --version), to run with plain node: what
 * a built agent costs, without tsx's loader thread and its transform cache (about 120 MiB of RSS on an idle agent).
 */
export async function bundleAgent(dir: string, entry: string = AGENT_CLI): Promise<string> {
  const { build } = await import('esbuild');
  const outfile = join(dir, 'bin', 'kube-router.mjs');
  await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    conditions: ['@kube-router/source'],
    logLevel: 'warning',
    // Some dependencies are CommonJS and call require(); an ES module bundle has none of its own.
    banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
  });
  await copyFile(join(AGENT_DIR, 'package.json'), join(dir, 'package.json'));
  return outfile;
}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

const AFTER_GC_PREFIX = 'gc-on-signal ';

function parseAfterGc(line: string): AfterGc | undefined {
  if (!line.startsWith(AFTER_GC_PREFIX)) return undefined;
  return JSON.parse(line.slice(AFTER_GC_PREFIX.length)) as AfterGc;
}

/** Enough of the text exposition format for numbers: `name{labels} value`, comments skipped. */
export function parsePrometheusText(text: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    values.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return values;
}

/** The value of `name` whose labels include every `label="value"` given (the first such series). */
export function metricValue(metrics: ReadonlyMap<string, number>, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels).map(([key, value]) => `${key}="${value}"`);
  for (const [series, value] of metrics) {
    const brace = series.indexOf('{');
    if ((brace === -1 ? series : series.slice(0, brace)) !== name) continue;
    if (wanted.every((pair) => series.includes(pair))) return value;
  }
  return undefined;
}

const ENFORCE_TIMEOUT_MS = 5 * 60_000;

/** A relabelling that puts a pod's address into a kernel set (ScaleWorld.labelProbe gives them). */
export interface LabelProbe {
  ip: string;
  set: string;
  apply(): void;
  undo(): void;
}

async function inKernelSet(netns: string, set: string, ip: string): Promise<boolean> {
  const result = await runner.run({ command: 'ipset', args: ['test', set, ip], netns, okExitCodes: [1], timeoutMs: 10_000 });
  return result.exitCode === 0;
}

async function waitForKernelSet(netns: string, set: string, ip: string, present: boolean): Promise<void> {
  const started = performance.now();
  while ((await inKernelSet(netns, set, ip)) !== present) {
    if (performance.now() - started > ENFORCE_TIMEOUT_MS) throw new Error(`${ip} ${present ? 'not in' : 'still in'} ${set} after ${ENFORCE_TIMEOUT_MS} ms`);
  }
}

/**
 * Relabels the probe's pod, waits for its address in the set and puts the label back (waiting for it to leave):
 * the time from the change to enforced. As syncs are level-triggered, it also shows that every earlier change is in.
 */
export async function labelChangeToEnforced(netns: string, probe: LabelProbe): Promise<number> {
  if (await inKernelSet(netns, probe.set, probe.ip)) throw new Error(`${probe.ip} is in ${probe.set} before its label changed`);
  const started = performance.now();
  probe.apply();
  await waitForKernelSet(netns, probe.set, probe.ip, true);
  const elapsed = performance.now() - started;
  probe.undo();
  await waitForKernelSet(netns, probe.set, probe.ip, false);
  return elapsed;
}
