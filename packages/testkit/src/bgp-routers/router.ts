import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExecRunner } from '@kube-router/netfilter';
import ipaddr from 'ipaddr.js';
import { waitFor } from '../wait.js';
import { canonicalPrefix, type BgpRouterConfig } from './config.js';

export type BgpSessionState = 'idle' | 'connect' | 'active' | 'opensent' | 'openconfirm' | 'established';

export interface BgpSession {
  readonly neighbor: string;
  readonly remoteAsn: number;
  readonly state: BgpSessionState;
  /** The daemon's own words about the session ("Established", "Active   Socket: Connection refused", ...). */
  readonly info: string;
}

/** One path the router learned from a neighbor (its own static routes are not listed). */
export interface BgpRoute {
  /** Canonical CIDR, "10.0.0.0/24". */
  readonly prefix: string;
  /** The BGP next hop (for IPv6 the global address). */
  readonly nextHop: string | undefined;
  readonly asPath: readonly number[];
  /** "65000:100". */
  readonly communities: readonly string[];
  /** "65000:1:2". */
  readonly largeCommunities: readonly string[];
  /** The neighbor it came from. */
  readonly from: string;
  /** The router chose this path for the prefix. */
  readonly best: boolean;
  readonly localPref: number | undefined;
  readonly med: number | undefined;
  /** When the router took the path in, ms since the epoch: BIRD to the microsecond, FRR to the second. */
  readonly receivedAt: number | undefined;
}

export type BgpDaemonKind = 'bird' | 'frr';

/** A BIRD or FRR BGP daemon running in a network namespace; see startBird() and startFrr(). */
export interface BgpRouter {
  readonly kind: BgpDaemonKind;
  readonly config: BgpRouterConfig;
  readonly netns: string;
  /** The directory with its configuration, control socket, pid file and log; stop() removes it. */
  readonly dir: string;
  /** The daemon's pid while it runs. */
  readonly pid: number | undefined;
  /** What the daemon logged so far (the last 64 KiB). */
  readonly log: string;
  sessions(): Promise<BgpSession[]>;
  session(neighbor: string): Promise<BgpSession | undefined>;
  /** Every path learned from neighbors, IPv4 and IPv6. */
  routes(): Promise<BgpRoute[]>;
  /** Resolves with the session once it is in `state` (default established). */
  waitForSession(neighbor: string, state?: BgpSessionState, timeoutMs?: number): Promise<BgpSession>;
  /** Resolves with the learned routes once `check` accepts them; `what` names the wait in the timeout error. */
  waitForRoutes(what: string, check: (routes: BgpRoute[]) => boolean, timeoutMs?: number): Promise<BgpRoute[]>;
  /** Resolves with the best path for the prefix once there is one that `match` (default: any) accepts. */
  waitForRoute(prefix: string, match?: (route: BgpRoute) => boolean, timeoutMs?: number): Promise<BgpRoute>;
  /** Resolves once no neighbor offers the prefix any more. */
  waitForNoRoute(prefix: string, timeoutMs?: number): Promise<void>;
  /** Drops the session to a neighbor; the daemon opens it again (a peer flap). */
  resetSession(neighbor: string): Promise<void>;
  /** Runs one command of the daemon's CLI (birdc / vtysh) and returns its output. */
  cli(command: string): Promise<string>;
  /** Kills the daemon and removes its files. Idempotent. */
  stop(): Promise<void>;
}

export const DEFAULT_BGP_WAIT_MS = 30_000;
const LOG_LIMIT = 64 * 1024;
const STOP_GRACE_MS = 3_000;

export const cliRunner = new ExecRunner({ defaultTimeoutMs: 10_000 });

// The test-wide safety net: a test run that ends without stop() (an uncaught error, process.exit, a failed
// beforeAll) still kills its daemons and removes their directories; stopAllBgpRouters() does it from afterAll.
const running = new Set<DaemonRouter>();
let exitHooked = false;

function hookExit(): void {
  if (exitHooked) return;
  exitHooked = true;
  process.once('exit', () => {
    for (const router of running) router.killNow();
  });
}

/** Stops every router this process started and has not stopped yet. */
export async function stopAllBgpRouters(): Promise<void> {
  await Promise.all([...running].map((router) => router.stop()));
}

export async function makeWorkDir(config: BgpRouterConfig, kind: BgpDaemonKind): Promise<{ dir: string; owned: boolean }> {
  if (config.workDir) return { dir: config.workDir, owned: false };
  return { dir: await mkdtemp(join(tmpdir(), `bgp-${kind}-`)), owned: true };
}

export interface DaemonSpawn {
  readonly file: string;
  readonly args: readonly string[];
}

/** What BIRD and FRR routers share: the process, its log, the waiters and the cleanup. */
export abstract class DaemonRouter implements BgpRouter {
  abstract readonly kind: BgpDaemonKind;
  readonly config: BgpRouterConfig;
  readonly dir: string;
  readonly #ownsDir: boolean;
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  #log = '';
  #stopping: Promise<void> | undefined;

  protected constructor(config: BgpRouterConfig, dir: string, ownsDir: boolean) {
    this.config = config;
    this.dir = dir;
    this.#ownsDir = ownsDir;
  }

  get netns(): string {
    return this.config.netns;
  }

  get pid(): number | undefined {
    const child = this.#child;
    return child && child.exitCode === null && child.signalCode === null ? child.pid : undefined;
  }

  get log(): string {
    return this.#log;
  }

  abstract sessions(): Promise<BgpSession[]>;
  abstract routes(): Promise<BgpRoute[]>;
  abstract resetSession(neighbor: string): Promise<void>;
  abstract cli(command: string): Promise<string>;
  /** Resolves once the daemon answers on its control socket. */
  protected abstract probeReady(): Promise<void>;

  async session(neighbor: string): Promise<BgpSession | undefined> {
    const wanted = canonicalAddress(neighbor);
    return (await this.sessions()).find((session) => canonicalAddress(session.neighbor) === wanted);
  }

  async waitForSession(neighbor: string, state: BgpSessionState = 'established', timeoutMs = DEFAULT_BGP_WAIT_MS): Promise<BgpSession> {
    let last: BgpSession | undefined;
    await this.#waitUntil(
      async () => {
        last = await this.session(neighbor);
        return last?.state === state;
      },
      () => `${this.kind} session to ${neighbor} in state ${state} (last: ${last ? `${last.state}, "${last.info}"` : 'no such neighbor'})`,
      timeoutMs,
    );
    return last!;
  }

  async waitForRoutes(what: string, check: (routes: BgpRoute[]) => boolean, timeoutMs = DEFAULT_BGP_WAIT_MS): Promise<BgpRoute[]> {
    let last: BgpRoute[] = [];
    await this.#waitUntil(
      async () => {
        last = await this.routes();
        return check(last);
      },
      () => `${this.kind} routes: ${what} (has ${last.length} paths)`,
      timeoutMs,
    );
    return last;
  }

  async waitForRoute(prefix: string, match: (route: BgpRoute) => boolean = () => true, timeoutMs = DEFAULT_BGP_WAIT_MS): Promise<BgpRoute> {
    const wanted = canonicalPrefix(prefix);
    let found: BgpRoute | undefined;
    let seen: BgpRoute[] = [];
    await this.#waitUntil(
      async () => {
        seen = (await this.routes()).filter((route) => route.prefix === wanted);
        // Only the best path: a daemon lists a new path a moment before it has run its best path selection.
        found = seen.find((route) => route.best && match(route));
        return found !== undefined;
      },
      () => `${this.kind} route to ${wanted} (seen: ${seen.length === 0 ? 'none' : JSON.stringify(seen)})`,
      timeoutMs,
    );
    return found!;
  }

  async waitForNoRoute(prefix: string, timeoutMs = DEFAULT_BGP_WAIT_MS): Promise<void> {
    const wanted = canonicalPrefix(prefix);
    await this.#waitUntil(
      async () => !(await this.routes()).some((route) => route.prefix === wanted),
      () => `${this.kind} to have no route to ${wanted}`,
      timeoutMs,
    );
  }

  stop(): Promise<void> {
    // Every caller (the test, stopAllBgpRouters) waits for the same stop.
    this.#stopping ??= (async () => {
      const child = this.#child;
      if (child && this.pid !== undefined) {
        const exited = this.#exited;
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
        await exited;
        clearTimeout(timer);
      }
      running.delete(this);
      if (this.#ownsDir) await rm(this.dir, { recursive: true, force: true });
    })();
    return this.#stopping;
  }

  /** Synchronous, for the exit hook. */
  killNow(): void {
    this.#child?.kill('SIGKILL');
    if (this.#ownsDir) rmSync(this.dir, { recursive: true, force: true });
  }

  /** Spawns the daemon in the foreground under `ip netns exec` and waits until its control socket answers. */
  protected async launch(command: DaemonSpawn, readyTimeoutMs = 10_000): Promise<void> {
    hookExit();
    running.add(this);
    const child = spawn('ip', ['netns', 'exec', this.netns, command.file, ...command.args], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child = child;
    let exit: string | undefined;
    this.#exited = new Promise((resolve) => {
      child.once('close', (code, signal) => {
        exit = `exited with ${code ?? signal}`;
        resolve();
      });
    });
    const append = (chunk: string) => {
      this.#log = (this.#log + chunk).slice(-LOG_LIMIT);
    };
    child.stdout!.setEncoding('utf8').on('data', append);
    child.stderr!.setEncoding('utf8').on('data', append);
    child.once('error', (error) => {
      exit = error.message;
      append(`${error.message}\n`);
    });
    try {
      let lastProbeError: unknown;
      await this.#waitUntil(
        async () => {
          // A daemon that exited ends the wait at once (a throwing check would only be retried).
          if (exit) return true;
          try {
            await this.probeReady();
            return true;
          } catch (error) {
            lastProbeError = error;
            return false;
          }
        },
        () => `${command.file} in ${this.netns} to answer (${String(lastProbeError)}; log: ${this.#log.trim()})`,
        readyTimeoutMs,
      );
      if (exit) throw new Error(`${command.file} ${exit}: ${this.#log.trim()}`);
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  async #waitUntil(check: () => Promise<boolean>, describe: () => string, timeoutMs: number): Promise<void> {
    // waitFor takes its message up front; the description of what was last seen is only known at the timeout.
    try {
      await waitFor(this.kind, check, timeoutMs);
    } catch (error) {
      if (error instanceof Error && error.message.startsWith('timed out')) {
        throw new Error(`timed out after ${timeoutMs} ms waiting for ${describe()}`, { cause: error });
      }
      throw error;
    }
  }
}

/** "fd00::0001" and "fd00::1" are the same neighbor. */
export function canonicalAddress(address: string): string {
  return ipaddr.isValid(address) ? ipaddr.parse(address).toString() : address;
}

export function sessionState(word: string): BgpSessionState {
  const state = word.toLowerCase();
  switch (state) {
    case 'connect':
    case 'active':
    case 'opensent':
    case 'openconfirm':
    case 'established':
      return state;
    // BIRD says "Passive" for a passive session waiting to be connected to.
    case 'passive':
      return 'active';
    default:
      return 'idle';
  }
}
