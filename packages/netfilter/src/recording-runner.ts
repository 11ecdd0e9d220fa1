import { CommandError, formatCommandLine } from './command.js';
import type { CommandResult, CommandRunner, CommandSpec } from './command.js';

/** What a scripted command answers. A non-zero exit code (not listed in okExitCodes) or timedOut makes it fail. */
export interface ScriptedResult {
  readonly stdout?: string;
  readonly stderr?: string;
  readonly exitCode?: number;
  readonly timedOut?: boolean;
}

/** A command name (`ipset`), a command line prefix (`ipset list -n`) or a predicate. */
export type InvocationMatcher = string | ((spec: CommandSpec) => boolean);
export type ScriptedResponse = ScriptedResult | ((spec: CommandSpec) => ScriptedResult | Promise<ScriptedResult>);

export interface RecordedInvocation {
  readonly command: string;
  readonly args: readonly string[];
  readonly input: string | undefined;
  readonly netns: string | undefined;
  readonly timeoutMs: number | undefined;
  /** `command arg ...` as a shell would show it. */
  readonly line: string;
}

interface Script {
  readonly matches: (spec: CommandSpec) => boolean;
  readonly response: ScriptedResponse;
  readonly once: boolean;
}

export interface RecordingRunnerOptions {
  /** Reject commands that no script matches instead of answering them with an empty success. */
  readonly strict?: boolean;
}

/**
 * A CommandRunner for unit tests: records every invocation and answers from scripts. A matching `once` script answers
 * first (queued in the order they were added, each used up by one match); otherwise the latest matching `on` script
 * answers. Failures are CommandErrors exactly like ExecRunner's.
 */
export class RecordingRunner implements CommandRunner {
  readonly invocations: RecordedInvocation[] = [];
  readonly #scripts: Script[] = [];
  readonly #strict: boolean;

  constructor(options: RecordingRunnerOptions = {}) {
    this.#strict = options.strict ?? false;
  }

  on(matcher: InvocationMatcher, response: ScriptedResponse): this {
    this.#scripts.push({ matches: toPredicate(matcher), response, once: false });
    return this;
  }

  once(matcher: InvocationMatcher, response: ScriptedResponse): this {
    this.#scripts.push({ matches: toPredicate(matcher), response, once: true });
    return this;
  }

  /** The recorded command lines, for compact assertions. */
  lines(): string[] {
    return this.invocations.map((invocation) => invocation.line);
  }

  reset(): void {
    this.invocations.length = 0;
    this.#scripts.length = 0;
  }

  async run(spec: CommandSpec): Promise<CommandResult> {
    const args = spec.args ?? [];
    this.invocations.push({
      command: spec.command,
      args,
      input: spec.input,
      netns: spec.netns,
      timeoutMs: spec.timeoutMs,
      line: formatCommandLine(spec.command, args),
    });
    const onceIndex = this.#scripts.findIndex((script) => script.once && script.matches(spec));
    const index = onceIndex >= 0 ? onceIndex : findLastIndex(this.#scripts, (script) => script.matches(spec));
    const script = index >= 0 ? this.#scripts[index] : undefined;
    if (!script) {
      if (this.#strict) {
        throw new CommandError({ command: spec.command, args, exitCode: null, spawnError: 'no scripted response' });
      }
      return { stdout: '', stderr: '', exitCode: 0, durationMs: 0 };
    }
    if (script.once) this.#scripts.splice(index, 1);
    const answer = typeof script.response === 'function' ? await script.response(spec) : script.response;
    const result = {
      stdout: answer.stdout ?? '',
      stderr: answer.stderr ?? '',
      exitCode: answer.exitCode ?? 0,
      durationMs: 0,
    };
    const ok = result.exitCode === 0 || (spec.okExitCodes?.includes(result.exitCode) ?? false);
    if (answer.timedOut || !ok) {
      throw new CommandError({
        command: spec.command,
        args,
        exitCode: answer.timedOut ? null : result.exitCode,
        signal: answer.timedOut ? 'SIGKILL' : null,
        stderr: result.stderr,
        stdout: result.stdout,
        timedOut: answer.timedOut ?? false,
        timeoutMs: spec.timeoutMs,
        netns: spec.netns,
      });
    }
    return result;
  }
}

function toPredicate(matcher: InvocationMatcher): (spec: CommandSpec) => boolean {
  if (typeof matcher === 'function') return matcher;
  return (spec) => {
    const line = formatCommandLine(spec.command, spec.args ?? []);
    return spec.command === matcher || line === matcher || line.startsWith(`${matcher} `);
  };
}

function findLastIndex<T>(items: readonly T[], predicate: (item: T) => boolean): number {
  for (let i = items.length - 1; i >= 0; i--) if (predicate(items[i] as T)) return i;
  return -1;
}
