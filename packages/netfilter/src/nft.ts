import { blamedInputLine } from './blamed-line.js';
import { CommandError } from './command.js';
import type { CommandResult, CommandRunner } from './command.js';
import { toolLocks } from './mutex.js';
import type { Mutex } from './mutex.js';
import { parseNftJson } from './nft-json.js';
import type { NftRuleset } from './nft-json.js';

export interface NftOptions {
  readonly runner: CommandRunner;
  readonly netns?: string;
  readonly timeoutMs?: number;
  /**
   * What its calls hold (default `toolLocks.nft`). Several, for an Nft whose transactions write more than one table
   * (each table's `nftTableLock`), are taken in the order given: keep one order for all of them.
   */
  readonly lock?: Mutex | readonly Mutex[];
  readonly command?: string;
}

/** The nft tool, optionally inside a network namespace. Each `apply` is one kernel transaction. */
export class Nft {
  readonly netns: string | undefined;
  readonly #runner: CommandRunner;
  readonly #timeoutMs: number;
  readonly #locks: readonly Mutex[];
  readonly #command: string;

  constructor(options: NftOptions) {
    this.#runner = options.runner;
    this.netns = options.netns;
    this.#timeoutMs = options.timeoutMs ?? 60_000;
    const lock = options.lock ?? toolLocks.nft;
    // By shape, not class: a second copy of this package in a consumer's tree makes other Mutex classes. Several
    // locks are taken in the order they were made, whatever order they are given in, so that two Nfts holding the
    // same locks never wait for each other.
    this.#locks = isLockList(lock) ? [...new Set(lock)].sort((a, b) => (a.order ?? 0) - (b.order ?? 0)) : [lock];
    if (this.#locks.length === 0) throw new Error('Nft: lock must name at least one mutex (none would serialise nothing)');
    this.#command = options.command ?? 'nft';
  }

  /**
   * Applies a script with `nft -f -`: all of it commits or none of it does. Resolves with nft's result, whose
   * `durationMs` is nft's own time, without the wait for this Nft's locks.
   */
  apply(script: string): Promise<CommandResult> {
    return this.#runScript(['-f', '-'], script);
  }

  /** Checks a script with `nft -c -f -` without changing anything. */
  async check(script: string): Promise<void> {
    await this.#runScript(['-c', '-f', '-'], script);
  }

  /** `nft -j list <what>`, parsed; `what` defaults to the whole ruleset, e.g. `['table', 'inet', 'kube-router']`. */
  async list(what: readonly string[] = ['ruleset']): Promise<NftRuleset> {
    return parseNftJson((await this.run(['-j', 'list', ...what])).stdout);
  }

  /**
   * Deletes those of these tables that exist, one transaction each, and resolves with how many went. Only a table the
   * listing shows is named: naming a table of a family the kernel lacks (`ip6` without IPv6) fails. One gone
   * meanwhile is not an error.
   */
  async deleteTables(tables: readonly { readonly family: string; readonly name: string }[]): Promise<number> {
    const listed = new Set((await this.list(['tables'])).tables.map((table) => `${table.family} ${table.name}`));
    let deleted = 0;
    for (const { family, name } of tables) {
      if (!listed.has(`${family} ${name}`)) continue;
      try {
        await this.apply(`delete table ${family} ${name}\n`);
        deleted++;
      } catch (error) {
        if (error instanceof CommandError && /No such file or directory/.test(error.stderr)) continue;
        throw error;
      }
    }
    return deleted;
  }

  run(args: readonly string[], input?: string): Promise<CommandResult> {
    return holdingAll(this.#locks, () =>
      this.#runner.run({ command: this.#command, args, input, netns: this.netns, timeoutMs: this.#timeoutMs }),
    );
  }

  async #runScript(args: readonly string[], script: string): Promise<CommandResult> {
    try {
      return await this.run(args, script);
    } catch (error) {
      if (!(error instanceof CommandError)) throw error;
      const blamed = blamedInputLine(error.stderr, script);
      throw blamed ? error.withHint(`input line ${blamed.line}: ${blamed.text}`) : error;
    }
  }
}

function holdingAll<T>(locks: readonly Mutex[], task: () => Promise<T>): Promise<T> {
  const [first, ...rest] = locks;
  return first ? first.runExclusive(() => holdingAll(rest, task)) : task();
}

function isLockList(lock: Mutex | readonly Mutex[]): lock is readonly Mutex[] {
  return Array.isArray(lock);
}

/**
 * nft ran and refused the script: the kernel (or nft's own checks) said no, and nothing of it was committed. nft
 * exits 1 with `Error: ...` lines then; its 2 (no memory) and 3 (no netlink) are not about the script, nor is
 * `ip netns exec` failing to enter the namespace or to start nft (exit 255, or 1 without `Error:`).
 */
export function isNftRefusal(error: unknown): boolean {
  return error instanceof CommandError && error.ranAndFailed && error.exitCode === 1 && /\bError: /.test(error.stderr);
}
