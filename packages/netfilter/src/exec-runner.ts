import type { Logger } from 'pino';
import { CommandError } from './command.js';
import type { CommandResult, CommandRunner, CommandSpec } from './command.js';
import { inProcessLauncher, sharedHelperLauncher } from './launcher.js';
import type { LaunchedCommand, Launcher } from './launcher.js';

export interface ExecRunnerOptions {
  /** Deadline of a command that does not set its own. */
  readonly defaultTimeoutMs?: number;
  /** The `ip` binary used for `ip netns exec`. */
  readonly ipCommand?: string;
  /** Logs every command at debug level with its duration and exit code. */
  readonly logger?: Logger;
  /** Where the runner's commands are tracked, so that a stop can kill them all. Default: `runningCommands`. */
  readonly registry?: CommandRegistry;
  /**
   * Where commands are spawned from. `helper` (the default): a small process started when the first ExecRunner is
   * made and shared by every ExecRunner of the process, so that a spawn never blocks this process's event loop (each
   * spawn copies the spawning process's page tables: 6-10 ms from an agent holding a large cluster). `in-process`: from
   * this process, as child_process.spawn does. While no helper can start, commands spawn in-process.
   */
  readonly spawnFrom?: 'helper' | 'in-process';
  /** @internal A launcher of its own (a test's, to kill its helper without touching the shared one). */
  readonly launcher?: Launcher;
}

interface RunningCommand {
  /** Kills the command's process group and fails it with `reason`. */
  kill(reason: string): void;
}

/**
 * Every command that ExecRunners have running, so that stopping the agent ends them all at once instead of waiting
 * for each to time out: a hung `iptables-restore` would otherwise outlive the agent, orphaned, holding the xtables
 * lock that the agent replacing it needs.
 */
export class CommandRegistry {
  readonly #running = new Set<RunningCommand>();
  #halted: string | undefined;

  /** How many commands are running now. */
  get size(): number {
    return this.#running.size;
  }

  /** Why new commands are refused, while halted. */
  get haltedBecause(): string | undefined {
    return this.#halted;
  }

  /**
   * Kills every running command with its process group (SIGKILL), at once, and fails new commands immediately with
   * `reason` until resume(): a sync that is being stopped must not start its next step. Returns how many it killed.
   */
  halt(reason: string): number {
    this.#halted = reason;
    const running = [...this.#running];
    for (const command of running) command.kill(reason);
    return running.length;
  }

  /** Lets commands run again (after the agent stopped, for what its caller does next, such as removing a lab). */
  resume(): void {
    this.#halted = undefined;
  }

  /** @internal Tracks one command until the returned function is called. */
  track(command: RunningCommand): () => void {
    this.#running.add(command);
    return () => void this.#running.delete(command);
  }
}

/** The registry that every ExecRunner uses unless given its own. */
export const runningCommands = new CommandRegistry();

export const DEFAULT_COMMAND_TIMEOUT_MS = 30_000;

/** Runs commands with a deadline, stdin input and an optional network namespace. */
export class ExecRunner implements CommandRunner {
  readonly defaultTimeoutMs: number;
  readonly #ipCommand: string;
  readonly #logger: Logger | undefined;
  readonly #registry: CommandRegistry;
  readonly #launcher: Launcher;

  constructor(options: ExecRunnerOptions = {}) {
    this.defaultTimeoutMs = options.defaultTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
    this.#ipCommand = options.ipCommand ?? 'ip';
    this.#logger = options.logger;
    this.#registry = options.registry ?? runningCommands;
    this.#launcher = options.launcher ?? (options.spawnFrom === 'in-process' ? inProcessLauncher : sharedHelperLauncher);
    // Now, while the caller is small and idle (a plugin is created before its informers list the cluster).
    this.#launcher.prepare?.();
  }

  run(spec: CommandSpec): Promise<CommandResult> {
    const args = spec.args ?? [];
    const timeoutMs = spec.timeoutMs ?? this.defaultTimeoutMs;
    const [file, argv] = spec.netns
      ? [this.#ipCommand, ['netns', 'exec', spec.netns, spec.command, ...args]]
      : [spec.command, [...args]];
    const started = performance.now();
    const failure = { command: spec.command, args, netns: spec.netns, timeoutMs };
    const halted = this.#registry.haltedBecause;
    if (halted !== undefined) {
      return Promise.reject(new CommandError({ ...failure, exitCode: null, notRunBecause: halted }));
    }

    let launched: LaunchedCommand;
    try {
      launched = this.#launcher.launch({
        file,
        argv,
        ...(spec.input === undefined ? {} : { input: spec.input }),
        // Tools' messages are parsed and shown to operators; keep them in one language.
        env: { ...process.env, LC_ALL: 'C' },
      });
    } catch (error) {
      return Promise.reject(new CommandError({ ...failure, exitCode: null, spawnError: error instanceof Error ? error.message : String(error) }));
    }
    let timedOut = false;
    /** Why the registry killed it (the agent stopping), if it did. */
    let killedBecause: string | undefined;
    let settled = false;
    // A command that had ended already (its large output still being read) is not called timed out or killed.
    const timer = setTimeout(() => {
      if (launched.kill()) timedOut = true;
    }, timeoutMs);
    const untrack = this.#registry.track({
      kill: (reason) => {
        if (settled || killedBecause !== undefined) return;
        if (launched.kill()) killedBecause = reason;
      },
    });

    return launched.ended.then((end) => {
      settled = true;
      clearTimeout(timer);
      untrack();
      if ('spawnError' in end) throw new CommandError({ ...failure, exitCode: null, spawnError: end.spawnError });
      const { code, signal, lostBecause } = end;
      const durationMs = Math.round((end.durationMs ?? performance.now() - started) * 10) / 10;
      const result = { stdout: end.stdout, stderr: end.stderr, exitCode: code ?? -1, durationMs };
      this.#logger?.debug(
        { command: spec.command, args, netns: spec.netns, exitCode: code, signal, timedOut, killedBecause, durationMs },
        'command finished',
      );
      const ok =
        !timedOut &&
        killedBecause === undefined &&
        lostBecause === undefined &&
        code !== null &&
        (code === 0 || (spec.okExitCodes?.includes(code) ?? false));
      if (ok) return result;
      throw new CommandError({
        ...failure,
        exitCode: code,
        signal,
        stderr: result.stderr,
        stdout: result.stdout,
        timedOut,
        ...(killedBecause !== undefined ? { hint: `killed: ${killedBecause}` } : lostBecause !== undefined && { hint: lostBecause }),
      });
    });
  }
}
