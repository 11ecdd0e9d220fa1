/** One invocation of an external tool. Every invocation has a deadline: the runner's default unless `timeoutMs` says otherwise. */
export interface CommandSpec {
  readonly command: string;
  readonly args?: readonly string[];
  /** Written to the tool's stdin; without it stdin is /dev/null so that a tool waiting for input cannot hang. */
  readonly input?: string;
  readonly timeoutMs?: number;
  /** Runs the tool inside this network namespace (`ip netns exec <netns> <command> ...`). */
  readonly netns?: string;
  /** Exit codes that are answers rather than failures, such as 1 from `iptables -C` for a missing rule. */
  readonly okExitCodes?: readonly number[];
}

export interface CommandResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number;
  readonly durationMs: number;
}

/** Runs external tools. The real one is ExecRunner; RecordingRunner stands in for it in unit tests. */
export interface CommandRunner {
  /** Resolves with the result, or rejects with a CommandError when the tool failed, timed out or could not start. */
  run(spec: CommandSpec): Promise<CommandResult>;
}

export interface CommandErrorDetails {
  readonly command: string;
  readonly args: readonly string[];
  readonly exitCode: number | null;
  readonly signal?: string | null;
  readonly stderr?: string;
  readonly stdout?: string;
  readonly timedOut?: boolean;
  readonly timeoutMs?: number;
  readonly netns?: string;
  /** Why the tool could not be started (ENOENT, EACCES, ...). */
  readonly spawnError?: string;
  /** Why the tool was not run at all: the agent is stopping, or an earlier command of the sync timed out. */
  readonly notRunBecause?: string;
  /** Extra context a caller adds, such as the restore input line that the tool rejected. */
  readonly hint?: string;
}

/** Stderr in messages is capped so that one broken rule set cannot produce a megabyte-long log line; `stderr` keeps it all. */
const MESSAGE_STDERR_LIMIT = 4000;

/** An external tool failed. The message names the command, why it failed and what it wrote to stderr. */
export class CommandError extends Error {
  readonly command: string;
  readonly args: readonly string[];
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly stderr: string;
  readonly stdout: string;
  readonly timedOut: boolean;
  readonly timeoutMs: number | undefined;
  readonly netns: string | undefined;
  readonly spawnError: string | undefined;
  readonly notRunBecause: string | undefined;
  readonly hint: string | undefined;

  constructor(details: CommandErrorDetails) {
    super(describeFailure(details));
    this.name = 'CommandError';
    this.command = details.command;
    this.args = details.args;
    this.exitCode = details.exitCode;
    this.signal = details.signal ?? null;
    this.stderr = details.stderr ?? '';
    this.stdout = details.stdout ?? '';
    this.timedOut = details.timedOut ?? false;
    this.timeoutMs = details.timeoutMs;
    this.netns = details.netns;
    this.spawnError = details.spawnError;
    this.notRunBecause = details.notRunBecause;
    this.hint = details.hint;
  }

  /**
   * The tool ran to its end and exited non-zero: it said no to what it was given. Not a timeout, a signal, a spawn
   * that failed or a runner that refused to start it, which say nothing about the input.
   */
  get ranAndFailed(): boolean {
    return this.exitCode !== null && this.exitCode !== 0 && !this.timedOut && this.signal === null && this.spawnError === undefined && this.notRunBecause === undefined;
  }

  /** The same failure with context added to its message (the error stays a CommandError with every field). */
  withHint(hint: string): CommandError {
    return new CommandError({ ...this.details(), hint: this.hint ? `${this.hint}; ${hint}` : hint });
  }

  details(): CommandErrorDetails {
    return {
      command: this.command,
      args: this.args,
      exitCode: this.exitCode,
      signal: this.signal,
      stderr: this.stderr,
      stdout: this.stdout,
      timedOut: this.timedOut,
      timeoutMs: this.timeoutMs,
      netns: this.netns,
      spawnError: this.spawnError,
      notRunBecause: this.notRunBecause,
      hint: this.hint,
    };
  }
}

export function formatCommandLine(command: string, args: readonly string[] = []): string {
  return [command, ...args].map(quoteForDisplay).join(' ');
}

function quoteForDisplay(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

function describeFailure(details: CommandErrorDetails): string {
  const where = details.netns ? ` (netns ${details.netns})` : '';
  const head = `${formatCommandLine(details.command, details.args)}${where}`;
  let reason: string;
  if (details.notRunBecause) reason = `was not run: ${details.notRunBecause}`;
  else if (details.spawnError) reason = `could not start: ${details.spawnError}`;
  else if (details.timedOut) reason = `timed out after ${details.timeoutMs ?? '?'}ms and was killed`;
  else if (details.exitCode === null) reason = `was killed by ${details.signal ?? 'a signal'}`;
  else reason = `exited with code ${details.exitCode}`;
  const stderr = (details.stderr ?? '').trim();
  const shown = stderr.length > MESSAGE_STDERR_LIMIT ? `${stderr.slice(0, MESSAGE_STDERR_LIMIT)}… (truncated)` : stderr;
  return [`${head} ${reason}`, shown && `stderr: ${shown}`, details.hint].filter(Boolean).join('; ');
}

/**
 * iptables gave up waiting for the xtables lock (its `--wait`): another process holds it, as iptables-legacy and other
 * agents do while they write. iptables exits with 4 (its resource problem) and says so on stderr.
 */
export function isXtablesLockHeld(error: unknown): error is CommandError {
  return error instanceof CommandError && error.ranAndFailed && error.exitCode === 4 && /holding the xtables lock/.test(error.stderr);
}

/**
 * A runner for the commands of one sync, whose steps depend on each other: once one command times out (a hung kernel
 * tool) or finds the xtables lock held by someone else past its wait, every later command of the sync fails at once,
 * naming that command, instead of each waiting out its own timeout or lock wait in turn. The failure then shows
 * within about one timeout or one lock wait, and nothing of the sync's later steps reaches the kernel once the lock
 * is free again (a later family's rules written after an earlier one's failed). `begin()` starts the next sync
 * afresh; the wrapped runner does the work.
 */
export class FailFastSession implements CommandRunner {
  readonly #runner: CommandRunner;
  #stoppedBy: CommandError | undefined;

  constructor(runner: CommandRunner) {
    this.#runner = runner;
  }

  /** The command that timed out in this sync, if one did. */
  get timedOut(): CommandError | undefined {
    return this.#stoppedBy?.timedOut ? this.#stoppedBy : undefined;
  }

  /** The command that stopped this sync's commands (it timed out, or found the xtables lock held), if one did. */
  get stoppedBy(): CommandError | undefined {
    return this.#stoppedBy;
  }

  /** Starts a new sync: commands run again. */
  begin(): void {
    this.#stoppedBy = undefined;
  }

  async run(spec: CommandSpec): Promise<CommandResult> {
    const earlier = this.#stoppedBy;
    if (earlier) {
      const what = earlier.timedOut ? `timed out after ${earlier.timeoutMs ?? '?'}ms` : 'found the xtables lock held by another process';
      throw new CommandError({
        command: spec.command,
        args: spec.args ?? [],
        exitCode: null,
        ...(spec.netns !== undefined && { netns: spec.netns }),
        notRunBecause: `${formatCommandLine(earlier.command, earlier.args)} ${what} earlier in this sync`,
      });
    }
    try {
      return await this.#runner.run(spec);
    } catch (error) {
      if (error instanceof CommandError && (error.timedOut || isXtablesLockHeld(error))) this.#stoppedBy ??= error;
      throw error;
    }
  }
}
