import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { CommandRunner, CommandSpec } from '@kube-router/netfilter';
import { waitFor } from '@kube-router/testkit';
import { serializeError } from './proxy-agent-protocol.js';
import type { FromProxyAgent, ProxyAgentConfig, SyncedMessage, ToProxyAgent } from './proxy-agent-protocol.js';

export type { ProxyAgentConfig, SyncedMessage } from './proxy-agent-protocol.js';
export { DRIFT_OBJECTS } from './proxy-agent-protocol.js';

export interface ProxyAgentHooks {
  /**
   * Asked for each command the process runs: true sends it to the kernel and SIGKILLs the process at once, so that
   * it dies with this command in flight (the command itself runs to its end, as a tool does when only the agent's
   * process is killed).
   */
  killWhileRunning?(spec: CommandSpec): boolean;
}

const entry = fileURLToPath(new URL('./proxy-agent.ts', import.meta.url));

/**
 * The proxy controller in a process of its own (proxy-agent.ts), run as the agent runs it: informers, the scheduler's
 * initial, triggered and retried syncs. Its commands come back over IPC and run through `runner` (into the QEMU
 * guest, whose RPC port only this process holds), so that SIGKILL ends the proxy and nothing else.
 */
export class ProxyAgentProcess {
  readonly syncs: SyncedMessage[] = [];
  /** performance.now() when the process was spawned. */
  readonly spawnedAt = performance.now();
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The command in flight when killWhileRunning killed the process, and when. */
  killed: { readonly spec: CommandSpec; readonly at: number } | undefined;
  /** performance.now() when its informers had synced and its scheduler started. */
  startedAt: number | undefined;
  commands = 0;
  stderr = '';
  readonly #child: ChildProcess;
  readonly #runner: CommandRunner;
  readonly #hooks: ProxyAgentHooks;
  #nextId = 1;

  constructor(runner: CommandRunner, config: ProxyAgentConfig, hooks: ProxyAgentHooks = {}) {
    this.#runner = runner;
    this.#hooks = hooks;
    // One Node process running the workspace's sources, as `npm start` runs the lab's agents (no npx or tsx wrapper in
    // between, so that SIGKILL reaches the proxy itself).
    this.#child = fork(entry, [JSON.stringify(config)], {
      execArgv: ['--conditions=@kube-router/source', '--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    });
    this.#child.stderr?.on('data', (chunk: Buffer) => (this.stderr += chunk.toString()));
    this.exited = new Promise((resolve) => this.#child.once('exit', (code, signal) => resolve({ code, signal })));
    this.#child.on('message', (message: FromProxyAgent) => this.#receive(message));
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  get running(): boolean {
    return this.#child.exitCode === null && this.#child.signalCode === null;
  }

  /** Resolves with the `index`-th sync (0 the initial one) once it has ended. */
  async syncNumber(index: number, timeoutMs = 60_000): Promise<SyncedMessage> {
    await waitFor(`sync ${index} of proxy process ${this.pid}`, () => this.#failIfGone() || this.syncs.length > index, { timeoutMs, intervalMs: 10 });
    return this.syncs[index] as SyncedMessage;
  }

  /** One sync now (after the one running, if any), with `reason` ('periodic' makes it a full one). */
  async sync(reason: string, timeoutMs = 60_000): Promise<SyncedMessage> {
    const id = this.#nextId++;
    this.#send({ type: 'sync', id, reason });
    await waitFor(`sync "${reason}" of proxy process ${this.pid}`, () => this.#failIfGone() || this.syncs.some((sync) => sync.id === id), { timeoutMs, intervalMs: 10 });
    return this.syncs.find((sync) => sync.id === id) as SyncedMessage;
  }

  /** A clean stop (scheduler, controller, informers), or SIGKILL when it takes longer than `timeoutMs`. */
  async stop(timeoutMs = 15_000): Promise<void> {
    if (!this.running) return;
    this.#send({ type: 'stop' });
    const late = setTimeout(() => this.#child.kill('SIGKILL'), timeoutMs);
    await this.exited;
    clearTimeout(late);
  }

  kill(): void {
    if (this.running) this.#child.kill('SIGKILL');
  }

  #failIfGone(): false {
    if (!this.running) throw new Error(`proxy process ${this.pid} exited; its stderr:\n${this.stderr.slice(-3000)}`);
    return false;
  }

  #send(message: ToProxyAgent): void {
    // A reply to a process that has just been killed has no one to read it.
    if (this.#child.connected) this.#child.send(message, () => undefined);
  }

  #receive(message: FromProxyAgent): void {
    if (message.type === 'started') this.startedAt = performance.now();
    else if (message.type === 'synced') this.syncs.push(message);
    else this.#run(message.id, message.spec);
  }

  #run(id: number, spec: CommandSpec): void {
    // Commands still in the channel when the process was killed: a killed agent starts no more.
    if (this.killed !== undefined) return;
    this.commands++;
    this.#runner.run(spec).then(
      (result) => this.#send({ type: 'ran', id, result }),
      (error: unknown) => this.#send({ type: 'failed', id, error: serializeError(error) }),
    );
    if (this.killed === undefined && this.#hooks.killWhileRunning?.(spec)) {
      this.killed = { spec, at: performance.now() };
      this.#child.kill('SIGKILL');
    }
  }
}
