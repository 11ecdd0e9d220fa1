import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { closeSync, openSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { CommandError } from './command.js';
import type { CommandResult, CommandRunner, CommandSpec } from './command.js';

export interface ExecRunnerOptions {
  /** Deadline of a command that does not set its own. */
  readonly defaultTimeoutMs?: number;
  /** The `ip` binary used for `ip netns exec`. */
  readonly ipCommand?: string;
  /** Logs every command at debug level with its duration and exit code. */
  readonly logger?: Logger;
  /** Where the runner's commands are tracked, so that a stop can kill them all. Default: `runningCommands`. */
  readonly registry?: CommandRegistry;
}

interface RunningCommand {
  readonly pid: number | undefined;
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

/** Inputs above this size reach the tool's stdin from a file rather than through a pipe. */
const LARGE_INPUT_BYTES = 64 * 1024;

/**
 * A large input (a restore or an nft transaction of megabytes) written to an unlinked temporary file, open for
 * reading, to be the child's stdin. Through a pipe, the input moves one pipe buffer (64 KiB) per turn of the event
 * loop: while the agent keeps the loop busy (building the next transaction), the tool waits for its input, and nft
 * reads all of its input before it parses any. Undefined when the input is small or no file can be written (a
 * read-only filesystem): the pipe then carries it.
 */
function largeInputFile(input: string): number | undefined {
  // A UTF-16 unit is at most three bytes of UTF-8: most inputs are known small without counting.
  if (input.length * 3 < LARGE_INPUT_BYTES) return undefined;
  // Encoded once, to be measured and written.
  const bytes = Buffer.from(input);
  if (bytes.length < LARGE_INPUT_BYTES) return undefined;
  const path = join(tmpdir(), `kube-router-input-${process.pid}-${randomUUID()}`);
  try {
    writeFileSync(path, bytes, { mode: 0o600, flag: 'wx' });
    return openSync(path, 'r');
  } catch {
    return undefined;
  } finally {
    try {
      unlinkSync(path);
    } catch {
      // Never written.
    }
  }
}

/** Runs commands with child_process.spawn, a deadline, stdin input and an optional network namespace. */
export class ExecRunner implements CommandRunner {
  readonly defaultTimeoutMs: number;
  readonly #ipCommand: string;
  readonly #logger: Logger | undefined;
  readonly #registry: CommandRegistry;

  constructor(options: ExecRunnerOptions = {}) {
    this.defaultTimeoutMs = options.defaultTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
    this.#ipCommand = options.ipCommand ?? 'ip';
    this.#logger = options.logger;
    this.#registry = options.registry ?? runningCommands;
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

    const inputFile = spec.input === undefined ? undefined : largeInputFile(spec.input);
    return new Promise<CommandResult>((resolve, reject) => {
      let child: ChildProcess;
      try {
        child = spawn(file, argv, {
          stdio: [inputFile ?? (spec.input === undefined ? 'ignore' : 'pipe'), 'pipe', 'pipe'],
          // Its own process group, so that a timeout also kills whatever the tool started.
          detached: true,
          // Tools' messages are parsed and shown to operators; keep them in one language.
          env: { ...process.env, LC_ALL: 'C' },
        });
      } catch (error) {
        // Some failures (an argument Node refuses, a spawn error it does not defer) throw here instead of arriving as
        // 'error': the input file is closed all the same, and the caller gets a CommandError like any other.
        if (inputFile !== undefined) closeSync(inputFile);
        reject(new CommandError({ ...failure, exitCode: null, spawnError: error instanceof Error ? error.message : String(error) }));
        return;
      }
      const stdout: Buffer[] = [];
      const stderr: Buffer[] = [];
      let timedOut = false;
      /** Why the registry killed it (the agent stopping), if it did. */
      let killedBecause: string | undefined;
      let settled = false;

      const timer = setTimeout(() => {
        timedOut = true;
        killGroup(child.pid, () => child.kill('SIGKILL'));
      }, timeoutMs);
      const untrack = this.#registry.track({
        pid: child.pid,
        kill: (reason) => {
          if (settled || killedBecause !== undefined) return;
          killedBecause = reason;
          killGroup(child.pid, () => child.kill('SIGKILL'));
        },
      });

      // The child holds its own descriptor of the file now.
      if (inputFile !== undefined) closeSync(inputFile);
      child.stdout?.on('data', (chunk: Buffer) => stdout.push(chunk));
      child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));
      if (spec.input !== undefined && child.stdin) {
        // A tool that exits before reading all its input makes the write fail with EPIPE; its exit status tells why.
        child.stdin.on('error', () => {});
        child.stdin.end(spec.input);
      }

      child.on('error', (error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        untrack();
        reject(new CommandError({ ...failure, exitCode: null, spawnError: error.message }));
      });

      const finish = (code: number | null, signal: NodeJS.Signals | null): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        untrack();
        const durationMs = Math.round((performance.now() - started) * 10) / 10;
        const result = {
          stdout: Buffer.concat(stdout).toString('utf8'),
          stderr: Buffer.concat(stderr).toString('utf8'),
          exitCode: code ?? -1,
          durationMs,
        };
        this.#logger?.debug(
          { command: spec.command, args, netns: spec.netns, exitCode: code, signal, timedOut, killedBecause, durationMs },
          'command finished',
        );
        const ok =
          !timedOut &&
          killedBecause === undefined &&
          code !== null &&
          (code === 0 || (spec.okExitCodes?.includes(code) ?? false));
        if (ok) {
          resolve(result);
          return;
        }
        reject(
          new CommandError({
            ...failure,
            exitCode: code,
            signal,
            stderr: result.stderr,
            stdout: result.stdout,
            timedOut,
            ...(killedBecause !== undefined && { hint: `killed: ${killedBecause}` }),
          }),
        );
      };

      child.on('close', finish);
      child.on('exit', (code, signal) => {
        // After a timeout or a kill, a descendant that left the process group may still hold stdout open, and
        // 'close' would wait for it; the command is over, so give up on the pipes.
        if (!timedOut && killedBecause === undefined) return;
        child.stdout?.destroy();
        child.stderr?.destroy();
        finish(code, signal);
      });
    });
  }
}

function killGroup(pid: number | undefined, fallback: () => void): void {
  if (pid === undefined) return fallback();
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    fallback();
  }
}
