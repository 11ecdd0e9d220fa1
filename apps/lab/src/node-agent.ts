import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';

/** The reference CLI, run from source as the lab runs everything: the agent exactly as `kube-router` ships. */
const REFERENCE_AGENT_CLI = new URL('../../agent/src/cli.ts', import.meta.url).pathname;
const REPOSITORY_ROOT = new URL('../../../', import.meta.url).pathname;

export interface NodeAgentOptions {
  nodeName: string;
  /** The lab node's network namespace: the agent process lives in it (`ip netns exec`), as on a real node. */
  netns: string;
  /** The agent's entry point; default the reference CLI. */
  cli?: string;
  /** kube-router flags. */
  args: readonly string[];
  /** Environment the DaemonSet would give the container (KUBE_ROUTER_CNI_CONF_FILE, ...). */
  env?: Readonly<Record<string, string>>;
  /**
   * The node's files at the paths the DaemonSet's volumeMounts give the container (the kubeconfig at
   * /var/lib/kube-router, the CNI directory at /etc/cni/net.d, the service account at
   * /var/run/secrets/kubernetes.io/serviceaccount), bind-mounted in the agent's own mount namespace, so that the host
   * and the other nodes' agents see none of them. Each target must exist on the host as a mount point.
   */
  mounts?: readonly AgentMount[];
  /** Receives every line the agent writes (JSON logs on stdout, messages on stderr). */
  onLine(stream: 'stdout' | 'stderr', line: string): void;
  logger: Logger;
}

export interface AgentMount {
  /** The node's file or directory on the host. */
  source: string;
  /** Where the container sees it. */
  target: string;
  readOnly?: boolean;
}

/**
 * The command that runs `command` in `netns` with `mounts` made first in a mount namespace of its own: `ip netns exec`
 * (the node's network), then `unshare --mount` with private propagation, then the bind mounts and an `exec`, so the
 * agent keeps the process the lab started.
 */
export function commandWithMounts(netns: string, mounts: readonly AgentMount[], command: readonly string[]): string[] {
  if (mounts.length === 0) return ['ip', 'netns', 'exec', netns, ...command];
  const steps = mounts.flatMap((mount, index) => {
    // The paths come in as positional parameters: nothing of them is parsed by the shell.
    const source = `"$${2 * index + 1}"`;
    const target = `"$${2 * index + 2}"`;
    return [`mount --bind ${source} ${target}`, ...(mount.readOnly ? [`mount -o remount,bind,ro ${target}`] : [])];
  });
  const script = `set -e; ${steps.join('; ')}; shift ${2 * mounts.length}; exec "$@"`;
  return [
    'ip', 'netns', 'exec', netns,
    'unshare', '--mount', '--propagation', 'private', '--',
    'sh', '-c', script, 'agent-mounts',
    ...mounts.flatMap((mount) => [mount.source, mount.target]),
    ...command,
  ];
}

/**
 * What a kubelet does when a container dies: it starts it again after a back-off of 10 s, doubled on each crash up to
 * 5 min, and reset once the container has run for 10 min.
 */
export const RESTART_BACKOFF = { initialMs: 10_000, maxMs: 300_000, resetAfterMs: 600_000 } as const;

/**
 * One lab node's agent: the kube-router CLI in its own process, inside the node's network namespace, in its own
 * process group so that Ctrl-C reaches only the lab, which then stops each agent in order. The lab plays the kubelet:
 * an agent killed by a signal (a crash, the OOM killer, `kill -9`) is started again with the same command after
 * RESTART_BACKOFF; an agent that exits with a code (a clean stop, a refused flag) stays down.
 */
export class NodeAgent {
  readonly nodeName: string;
  readonly netns: string;
  /**
   * Settles with the exit code (or the signal's name) when the agent ends for good: it exited with a code, it could not
   * be spawned, or the lab stopped it. A death by a signal is followed by a restart instead.
   */
  readonly exited: Promise<number | string>;
  readonly #options: NodeAgentOptions;
  readonly #logger: Logger;
  readonly #command: { file: string; args: string[] };
  #child: ChildProcess;
  #childStartedAt = Date.now();
  #exit: number | string | undefined;
  #settle!: (exit: number | string) => void;
  #stopping = false;
  #restarts = 0;
  #backoffMs: number = RESTART_BACKOFF.initialMs;
  #restartTimer: NodeJS.Timeout | undefined;
  #lastDeath: string | undefined;

  constructor(options: NodeAgentOptions) {
    this.nodeName = options.nodeName;
    this.netns = options.netns;
    this.#options = options;
    this.#logger = options.logger;
    const [file, ...args] = commandWithMounts(options.netns, options.mounts ?? [], [
      process.execPath, '--conditions=@kube-router/source', '--import', 'tsx', options.cli ?? REFERENCE_AGENT_CLI, ...options.args,
    ]);
    this.#command = { file: file!, args };
    this.exited = new Promise((resolve) => (this.#settle = resolve));
    this.#child = this.#spawn();
  }

  /** The agent's current process (a restarted agent has a new one). */
  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** False once the agent has ended for good; true while it runs or waits to be restarted. */
  get running(): boolean {
    return this.#exit === undefined;
  }

  /** How often the agent was started again after it was killed. */
  get restarts(): number {
    return this.#restarts;
  }

  #spawn(): ChildProcess {
    const options = this.#options;
    const child = spawn(this.#command.file, this.#command.args, {
      cwd: REPOSITORY_ROOT,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      // Leader election identity, as a DaemonSet's downward API would set it: one per node.
      env: { ...process.env, POD_NAME: `kube-router-${options.nodeName}`, POD_NAMESPACE: 'kube-system', ...options.env },
    });
    this.#childStartedAt = Date.now();
    for (const stream of ['stdout', 'stderr'] as const) {
      createInterface({ input: child[stream]! }).on('line', (line) => options.onLine(stream, line));
    }
    // Should the lab itself die without stopping its agents, they must not outlive it in namespaces that are gone.
    const killOnExit = () => {
      if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) killGroup(child.pid);
    };
    process.once('exit', killOnExit);
    child.once('error', (error) => {
      process.off('exit', killOnExit);
      this.#end(`spawn failed: ${error.message}`);
    });
    child.once('exit', (code, signal) => {
      process.off('exit', killOnExit);
      if (signal !== null && !this.#stopping) this.#restartLater(child, signal);
      else this.#end(code ?? signal ?? 'unknown');
    });
    return child;
  }

  /** As a kubelet: what was left in the dead agent's process group goes, and the same command runs after the back-off. */
  #restartLater(child: ChildProcess, signal: NodeJS.Signals): void {
    if (child.pid !== undefined) killGroup(child.pid);
    if (Date.now() - this.#childStartedAt >= RESTART_BACKOFF.resetAfterMs) this.#backoffMs = RESTART_BACKOFF.initialMs;
    const delayMs = this.#backoffMs;
    this.#backoffMs = Math.min(this.#backoffMs * 2, RESTART_BACKOFF.maxMs);
    this.#lastDeath = signal;
    this.#logger.warn(
      { node: this.nodeName, signal, restartInMs: delayMs, restarts: this.#restarts },
      `the agent of ${this.nodeName} was killed by ${signal}: starting it again in ${delayMs / 1000} s, as a kubelet restarts a crashed container`,
    );
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = undefined;
      if (this.#stopping) return;
      this.#restarts++;
      this.#child = this.#spawn();
      this.#logger.info({ node: this.nodeName, pid: this.#child.pid, restarts: this.#restarts }, `the agent of ${this.nodeName} started again`);
    }, delayMs);
  }

  #end(exit: number | string): void {
    if (this.#exit !== undefined) return;
    this.#exit = exit;
    this.#settle(exit);
  }

  /**
   * Resolves once `url` answers with a status `accept` takes (200 by default), with the answer's status and body;
   * rejects when the agent ends for good first, the time is up or `signal` aborts.
   */
  async waitForAnswer(
    url: string,
    timeoutMs: number,
    signal?: AbortSignal,
    accept: (status: number) => boolean = (status) => status === 200,
  ): Promise<{ status: number; body: string }> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      signal?.throwIfAborted();
      if (!this.running) throw new Error(`the agent of ${this.nodeName} exited (${this.#exit}) before ${url} answered`);
      try {
        const response = await fetch(url, { signal: AbortSignal.timeout(1_000) });
        const body = await response.text();
        if (accept(response.status)) return { status: response.status, body };
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`the agent of ${this.nodeName} did not answer ${url} within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  /**
   * SIGTERM, as the kubelet stops a pod, and the agent's own clean stop; after `graceMs` its whole process group is
   * killed. An agent waiting to be restarted stays down. Resolves with its exit code (or signal).
   */
  async stop(graceMs: number): Promise<number | string> {
    this.#stopping = true;
    if (this.#restartTimer !== undefined) {
      clearTimeout(this.#restartTimer);
      this.#restartTimer = undefined;
      this.#end(this.#lastDeath ?? 'unknown');
    }
    const child = this.#child;
    if (this.running && child.pid !== undefined) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => {
        this.#logger.warn({ node: this.nodeName, graceMs }, 'the agent did not stop in time: killing it');
        killGroup(child.pid!);
      }, graceMs);
      await this.exited;
      clearTimeout(timer);
    }
    // Whatever the agent left in its group (a supervised daemon it could not stop) goes with it.
    if (child.pid !== undefined) killGroup(child.pid);
    return this.exited;
  }
}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // the group is gone
  }
}

/** The processes still running in a network namespace, with their command lines (for the logs). */
export async function processesInNetns(netns: string): Promise<{ pid: number; command: string }[]> {
  const pids = await new Promise<number[]>((resolve) => {
    const child = spawn('ip', ['netns', 'pids', netns], { stdio: ['ignore', 'pipe', 'ignore'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.on('error', () => resolve([]));
    child.on('close', () =>
      resolve(
        output
          .split('\n')
          .map((line) => Number.parseInt(line, 10))
          .filter((pid) => Number.isInteger(pid) && pid > 0),
      ),
    );
  });
  return Promise.all(
    pids.map(async (pid) => ({
      pid,
      command: await readFile(`/proc/${pid}/cmdline`, 'utf8').then(
        (text) => text.split('\0').join(' ').trim(),
        () => '',
      ),
    })),
  );
}

/** SIGKILLs the processes and resolves once they are gone (reaped), or after `timeoutMs`. */
export async function killAndWait(pids: readonly number[], timeoutMs: number): Promise<void> {
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
    } catch {
      return false;
    }
    // A zombie still answers signal 0 until its parent reaps it.
    return !/^\d+ \(.*\) Z/.test(readFileSyncOrEmpty(`/proc/${pid}/stat`));
  };
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  const deadline = Date.now() + timeoutMs;
  while (pids.some(alive) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
}

function readFileSyncOrEmpty(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}
