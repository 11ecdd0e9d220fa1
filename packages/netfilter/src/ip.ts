import { blamedInputLine } from './blamed-line.js';
import { CommandError } from './command.js';
import type { CommandResult, CommandRunner } from './command.js';
import type { IpFamily } from './family.js';
import { toolLocks } from './mutex.js';
import type { Mutex } from './mutex.js';

export interface IpLink {
  readonly ifindex: number;
  readonly ifname: string;
  readonly flags: readonly string[];
  readonly mtu: number;
  readonly operstate: string;
  readonly link_type: string;
  readonly address?: string;
  readonly [field: string]: unknown;
}

export interface IpAddressInfo {
  readonly family: 'inet' | 'inet6';
  readonly local: string;
  readonly prefixlen: number;
  readonly scope: string;
  readonly [field: string]: unknown;
}

export interface IpLinkAddresses extends IpLink {
  readonly addr_info: readonly IpAddressInfo[];
}

export interface IpRoute {
  readonly dst: string;
  readonly gateway?: string;
  readonly dev?: string;
  readonly protocol?: string;
  readonly scope?: string;
  readonly prefsrc?: string;
  readonly metric?: number;
  readonly table?: string;
  readonly flags: readonly string[];
  readonly [field: string]: unknown;
}

export interface IpRouteQuery {
  readonly family?: IpFamily;
  /** A table number or name; `all` lists every table. */
  readonly table?: string | number;
  /** Only routes installed with this protocol (a number or a name from rt_protos). */
  readonly protocol?: string | number;
}

/** One command of `IpRoute2.batchEach` that failed. */
export interface IpBatchFailure {
  /** 1-based position of the command in the batch. */
  readonly line: number;
  readonly command: string;
  readonly error: CommandError;
}

export interface IpRoute2Options {
  readonly runner: CommandRunner;
  readonly netns?: string;
  readonly timeoutMs?: number;
  readonly lock?: Mutex;
  readonly command?: string;
}

/** iproute2's `ip`, optionally inside a network namespace: batches on stdin and JSON output. */
export class IpRoute2 {
  readonly netns: string | undefined;
  readonly #runner: CommandRunner;
  readonly #timeoutMs: number;
  readonly #lock: Mutex;
  readonly #command: string;

  constructor(options: IpRoute2Options) {
    this.#runner = options.runner;
    this.netns = options.netns;
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#lock = options.lock ?? toolLocks.iproute2;
    this.#command = options.command ?? 'ip';
  }

  /**
   * Runs commands (`route replace 10.0.0.0/24 via 10.1.0.1`, without the leading `ip`) with `ip -batch -`. Without
   * `force`, ip stops at the first failing command; with it, ip runs them all and still fails if any failed.
   */
  async batch(commands: readonly string[], options: { readonly force?: boolean } = {}): Promise<void> {
    if (commands.length === 0) return;
    assertOneLineEach(commands);
    const input = `${commands.join('\n')}\n`;
    try {
      await this.run([...(options.force ? ['-force'] : []), '-batch', '-'], input);
    } catch (error) {
      if (!(error instanceof CommandError)) throw error;
      const blamed = blamedInputLine(error.stderr, input);
      throw blamed ? error.withHint(`input line ${blamed.line}: ${blamed.text}`) : error;
    }
  }

  /**
   * Runs every command with `ip -force -batch -` and reports each one that failed, so that one bad route costs only
   * itself and one process serves thousands of commands. Each failure is a CommandError whose stderr holds only what
   * ip wrote about that command. Rejects when ip itself failed (could not start, timed out, a missing namespace) or
   * stopped early on a command it could not parse: then no command can be told apart from another.
   */
  async batchEach(commands: readonly string[]): Promise<IpBatchFailure[]> {
    if (commands.length === 0) return [];
    assertOneLineEach(commands);
    try {
      await this.run(['-force', '-batch', '-'], `${commands.join('\n')}\n`);
      return [];
    } catch (error) {
      if (!(error instanceof CommandError) || error.timedOut) throw error;
      const { failed, unattributed } = failedBatchLines(error.stderr);
      // ip gives up on a command it cannot parse (a bad address) without naming its line, and runs nothing after
      // it: which commands ran is then unknown, so the batch as a whole failed.
      if (unattributed !== '') throw error.withHint('ip stopped before the end of the batch');
      const failures = failed.flatMap(({ line, stderr }) => {
        const command = commands[line - 1];
        if (command === undefined) return [];
        return [{ line, command, error: new CommandError({ ...error.details(), stderr, hint: `input line ${line}: ${command}` }) }];
      });
      if (failures.length === 0) throw error;
      return failures;
    }
  }

  /** `ip -j <args>` parsed; ip prints nothing for some empty listings, which is returned as an empty array. */
  async json<T = unknown>(args: readonly string[]): Promise<T> {
    const { stdout } = await this.run(['-j', ...args]);
    const trimmed = stdout.trim();
    return (trimmed === '' ? [] : JSON.parse(trimmed)) as T;
  }

  links(): Promise<IpLink[]> {
    return this.json<IpLink[]>(['link', 'show']);
  }

  addresses(device?: string): Promise<IpLinkAddresses[]> {
    return this.json<IpLinkAddresses[]>(
      device === undefined ? ['address', 'show'] : ['address', 'show', 'dev', device],
    );
  }

  /** Routes of one family (IPv4 unless asked). A routing table that holds no route yet lists as empty. */
  async routes(query: IpRouteQuery = {}): Promise<IpRoute[]> {
    const args = [query.family === 'ipv6' ? '-6' : '-4', 'route', 'show'];
    if (query.table !== undefined) args.push('table', String(query.table));
    if (query.protocol !== undefined) args.push('proto', String(query.protocol));
    try {
      return await this.json<IpRoute[]>(args);
    } catch (error) {
      // The kernel creates a table with its first route; before that, ip reports it missing rather than empty.
      if (error instanceof CommandError && /FIB table does not exist/.test(error.stderr)) return [];
      throw error;
    }
  }

  run(args: readonly string[], input?: string): Promise<CommandResult> {
    return this.#lock.runExclusive(() =>
      this.#runner.run({ command: this.#command, args, input, netns: this.netns, timeoutMs: this.#timeoutMs }),
    );
  }
}

/**
 * Splits the stderr of `ip -force -batch` by command: ip writes its messages about a command (`Error: Nexthop has
 * invalid gateway.`, `RTNETLINK answers: File exists`) and then `Command failed -:<line>`.
 */
function failedBatchLines(stderr: string): { failed: { line: number; stderr: string }[]; unattributed: string } {
  const failed: { line: number; stderr: string }[] = [];
  let pending: string[] = [];
  for (const text of stderr.split('\n')) {
    const match = /^Command failed -:(\d+)\s*$/.exec(text);
    if (match) {
      failed.push({ line: Number(match[1]), stderr: [...pending, text].join('\n') });
      pending = [];
    } else if (text.trim() !== '') {
      pending.push(text);
    }
  }
  return { failed, unattributed: pending.join('\n') };
}

function assertOneLineEach(commands: readonly string[]): void {
  for (const command of commands) {
    if (/[\r\n]/.test(command)) throw new RangeError(`ip batch command contains a line break: ${JSON.stringify(command)}`);
  }
}
