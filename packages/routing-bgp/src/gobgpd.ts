import { spawn, type ChildProcess } from 'node:child_process';
import { lstatSync, mkdirSync, unlinkSync } from 'node:fs';
import { dirname } from 'node:path';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';
import { killLeftoverProcesses } from '@kube-router/netfilter';

export interface GobgpdSupervisorOptions {
  /** Default `gobgpd`. */
  binary?: string;
  /** Runs gobgpd inside this network namespace (`ip netns exec`). */
  netns?: string;
  /** gobgpd's --api-hosts: `host:port` or `unix:///path`. */
  apiHosts: readonly string[];
  logger: Logger;
  /** First restart delay; doubled after each crash up to `maxRestartDelayMs`. Default 500 ms. */
  initialRestartDelayMs?: number;
  /** Default 30 s. */
  maxRestartDelayMs?: number;
  /** A run that lasted this long resets the delay. Default 60 s. */
  stableAfterMs?: number;
  /** Called after each spawn, including restarts: the caller configures the new process over gRPC. */
  onSpawn?: (pid: number) => void;
}

/**
 * Runs gobgpd as a child of the agent and keeps it running: a crash is followed by a restart after a delay that
 * doubles up to a bound, its log lines go to the agent's logger, and stop() ends it with its whole process group.
 */
/** How long a gobgpd started again after a crash must run before readiness takes it as serving. */
const READY_AFTER_RESTART_MS = 3_000;

export class GobgpdSupervisor {
  readonly #options: GobgpdSupervisorOptions;
  readonly #logger: Logger;
  #child: ChildProcess | undefined;
  #stopping = false;
  #restartTimer: NodeJS.Timeout | undefined;
  #restartDelayMs: number;
  #restarts = 0;
  /** How the last gobgpd ended, and when the next one starts: what readiness says while none runs. */
  #lastExit: { code: number | null; signal: NodeJS.Signals | null; restartAt: number } | undefined;
  #exited: Promise<void> = Promise.resolve();
  /** When the running gobgpd was spawned. */
  #startedAt = 0;
  readonly #killOnExit = () => this.#killGroup('SIGKILL');

  constructor(options: GobgpdSupervisorOptions) {
    this.#options = options;
    this.#logger = options.logger.child({ component: 'gobgpd' });
    this.#restartDelayMs = options.initialRestartDelayMs ?? 500;
  }

  get pid(): number | undefined {
    return this.#child?.exitCode === null && this.#child.signalCode === null ? this.#child.pid : undefined;
  }

  /**
   * Why gobgpd is not serving, for a readiness check: undefined while it runs (or once stopped on purpose), else its
   * last exit and when the next start is due. A gobgpd that exits at once is not running nearly all the time, so the
   * controller is not ready while it crash-loops; its syncs fail and count meanwhile.
   */
  notRunningReason(now: number = Date.now()): string | undefined {
    if (this.#stopping) return undefined;
    const exit = this.#lastExit;
    const running = this.#child?.pid !== undefined;
    if (exit === undefined) return running ? undefined : 'gobgpd has not started';
    const how = exit.signal ? `killed by ${exit.signal}` : `exited with code ${exit.code}`;
    if (!running) return `gobgpd ${how}; restarting in ${Math.max(0, exit.restartAt - now)} ms (${this.#restarts} restarts so far)`;
    // A gobgpd started again after a crash is ready once it has stayed up a moment: one that exits at once would
    // otherwise read ready for the instant between its start and its exit, on every turn of its crash loop.
    const up = now - this.#startedAt;
    if (up >= READY_AFTER_RESTART_MS) return undefined;
    return `gobgpd ${how}; restarted ${up} ms ago, ready once it has run ${READY_AFTER_RESTART_MS} ms (${this.#restarts} restarts so far)`;
  }

  /** How many times gobgpd was restarted after it died. */
  get restarts(): number {
    return this.#restarts;
  }

  /** Kills a leftover gobgpd of ours (same --api-hosts, same namespace), then spawns. */
  async start(): Promise<void> {
    this.#stopping = false;
    await killOurGobgpd(this.#options);
    process.on('exit', this.#killOnExit);
    this.#spawn();
  }

  /** SIGTERM (gobgpd then ends every session with a Cease), or `signal`; SIGKILL after `timeoutMs`. */
  async stop({ timeoutMs = 5_000, signal = 'SIGTERM' }: { timeoutMs?: number; signal?: NodeJS.Signals } = {}): Promise<void> {
    this.#stopping = true;
    clearTimeout(this.#restartTimer);
    process.off('exit', this.#killOnExit);
    if (!this.pid) return;
    const exited = this.#exited;
    this.#killGroup(signal);
    const timer = setTimeout(() => this.#killGroup('SIGKILL'), timeoutMs);
    await exited;
    clearTimeout(timer);
  }

  #spawn(): void {
    const { binary = 'gobgpd', netns, apiHosts } = this.#options;
    const args = [`--api-hosts=${apiHosts.join(',')}`, '--pprof-disable', '--log-level=info'];
    const [file, argv] = netns ? ['ip', ['netns', 'exec', netns, binary, ...args]] : [binary, args];
    removeStaleSockets(apiHosts);
    const started = Date.now();
    this.#startedAt = started;
    // Its own process group: stop() and the exit handler end gobgpd with whatever it started.
    const child = spawn(file, argv, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    this.#child = child;
    this.#exited = new Promise((resolve) => child.once('close', () => resolve()));
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on('line', (line) => this.#logLine(line));
    }
    child.once('error', (error) => this.#logger.error({ err: error, binary }, 'gobgpd could not be started'));
    child.once('spawn', () => {
      this.#logger.info({ pid: child.pid, netns, apiHosts }, 'gobgpd started');
      if (child.pid) this.#options.onSpawn?.(child.pid);
    });
    child.once('close', (code, signal) => {
      if (this.#child === child) this.#child = undefined;
      if (this.#stopping) {
        this.#logger.info({ code, signal }, 'gobgpd stopped');
        return;
      }
      if (Date.now() - started >= (this.#options.stableAfterMs ?? 60_000)) {
        this.#restartDelayMs = this.#options.initialRestartDelayMs ?? 500;
      }
      const delayMs = this.#restartDelayMs;
      this.#restartDelayMs = Math.min(delayMs * 2, this.#options.maxRestartDelayMs ?? 30_000);
      this.#lastExit = { code, signal, restartAt: Date.now() + delayMs };
      this.#logger.error({ code, signal, restartInMs: delayMs }, 'gobgpd exited; restarting');
      this.#restartTimer = setTimeout(() => {
        this.#restarts += 1;
        this.#spawn();
      }, delayMs);
    });
  }

  #killGroup(signal: NodeJS.Signals): void {
    const pid = this.#child?.pid;
    if (!pid) return;
    try {
      process.kill(-pid, signal);
    } catch {
      // Already gone.
    }
  }

  /** gobgpd logs JSON lines (logrus); each becomes one line of the agent's log at the same level. */
  #logLine(line: string): void {
    if (!line.trim()) return;
    let parsed: Record<string, unknown> | undefined;
    try {
      const value: unknown = JSON.parse(line);
      if (value && typeof value === 'object') parsed = value as Record<string, unknown>;
    } catch {
      parsed = undefined;
    }
    if (!parsed) {
      this.#logger.info(line);
      return;
    }
    const { level, msg, time: _time, ...fields } = parsed;
    const message = typeof msg === 'string' ? msg : line;
    switch (level) {
      case 'debug':
      case 'trace':
        this.#logger.debug({ gobgpd: fields }, message);
        break;
      case 'warning':
        this.#logger.warn({ gobgpd: fields }, message);
        break;
      case 'error':
      case 'fatal':
      case 'panic':
        this.#logger.error({ gobgpd: fields }, message);
        break;
      default:
        this.#logger.info({ gobgpd: fields }, message);
    }
  }
}

/**
 * Finds gobgpd processes that this plugin would have started with these options (same --api-hosts argument, same
 * network namespace) and kills them: a leftover of an agent that died without stopping it would hold the API
 * address. Other gobgpd processes on the node are never touched.
 */
export async function killOurGobgpd(options: Pick<GobgpdSupervisorOptions, 'apiHosts' | 'netns'>): Promise<number[]> {
  const wantedArg = `--api-hosts=${options.apiHosts.join(',')}`;
  return killLeftoverProcesses({
    ...(options.netns !== undefined && { netns: options.netns }),
    matches: (argv) => argv[0]?.endsWith('gobgpd') === true && argv.includes(wantedArg),
  });
}

/**
 * A gobgpd killed with SIGKILL leaves its API socket file behind and the next one fails to bind it. Called only when
 * no gobgpd of ours runs, so the file is stale; only sockets are removed, never a file a misconfiguration points at.
 * The socket's directory is created (owner only) when missing, as gobgpd does not.
 */
function removeStaleSockets(apiHosts: readonly string[]): void {
  for (const host of apiHosts) {
    if (!host.startsWith('unix://')) continue;
    const path = host.slice('unix://'.length);
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    try {
      if (lstatSync(path).isSocket()) unlinkSync(path);
    } catch {
      // Absent: nothing to remove.
    }
  }
}

