import { CommandError } from './command.js';
import type { CommandResult, CommandRunner } from './command.js';
import { hasTool } from './executables.js';
import { kernelHasFamily } from './family.js';
import type { IpFamily } from './family.js';
import { blameRestoreFailure } from './iptables-restore.js';
import { parseIptablesSave, selectOwnChains } from './iptables-save.js';
import type { OwnChains, SavedTable } from './iptables-save.js';
import { toolLocks } from './mutex.js';
import type { Mutex } from './mutex.js';

/** `default` is whatever `iptables` points to (nf_tables on current Debian); the others name a backend's binaries. */
export type IptablesBackend = 'default' | 'nft' | 'legacy';

export interface IptablesOptions {
  readonly runner: CommandRunner;
  readonly family?: IpFamily;
  readonly backend?: IptablesBackend;
  readonly netns?: string;
  /** How long to wait for the xtables lock (`--wait`). */
  readonly waitSeconds?: number;
  /** Deadline of each command. Larger than waitSeconds so that lock waits end first with their own message. */
  readonly timeoutMs?: number;
  readonly lock?: Mutex;
}

export interface IptablesVersion {
  readonly version: string;
  readonly backend: 'nf_tables' | 'legacy';
}

export type IptablesTool = 'iptables' | 'restore' | 'save';

/** The binary of `tool` for a family and backend (`ip6tables-nft-save`): what a plugin's `tools` names and runs. */
export function iptablesBinary(family: IpFamily, backend: IptablesBackend, tool: IptablesTool): string {
  const base = family === 'ipv4' ? 'iptables' : 'ip6tables';
  const suffix = backend === 'default' ? '' : `-${backend}`;
  return tool === 'iptables' ? `${base}${suffix}` : `${base}${suffix}-${tool}`;
}

/**
 * iptables or ip6tables of one backend, optionally inside a network namespace. Restores are always `--noflush`, so
 * they touch only the chains their input declares; every command waits for the xtables lock and runs under the
 * process-wide xtables mutex.
 */
export class Iptables {
  readonly family: IpFamily;
  readonly backend: IptablesBackend;
  readonly netns: string | undefined;
  readonly #runner: CommandRunner;
  readonly #waitSeconds: number;
  readonly #timeoutMs: number;
  readonly #lock: Mutex;
  #randomFully: Promise<boolean> | undefined;

  constructor(options: IptablesOptions) {
    this.#runner = options.runner;
    this.family = options.family ?? 'ipv4';
    this.backend = options.backend ?? 'default';
    this.netns = options.netns;
    this.#waitSeconds = options.waitSeconds ?? 5;
    this.#timeoutMs = options.timeoutMs ?? Math.max(60_000, this.#waitSeconds * 1000 + 30_000);
    this.#lock = options.lock ?? toolLocks.xtables;
  }

  /**
   * Whether this family's tables can be read and rewritten here: the kernel has the family and this backend's save
   * and restore binaries are installed. Without them there is nothing of the family to find or remove.
   */
  canSaveAndRestore(): boolean {
    return kernelHasFamily(this.family) && hasTool(this.binary('save')) && hasTool(this.binary('restore'));
  }

  /** The binary of `tool`: iptables, iptables-restore, ip6tables-nft-save, ... */
  binary(tool: IptablesTool): string {
    return iptablesBinary(this.family, this.backend, tool);
  }

  /**
   * Applies restore input with `--noflush`: declared chains are flushed and refilled, nothing else in the table
   * changes, and the whole input commits atomically per table. A rejected input fails with the blamed line attached.
   */
  async restore(input: string): Promise<void> {
    try {
      await this.#run(this.binary('restore'), ['--noflush', `--wait=${this.#waitSeconds}`], input);
    } catch (error) {
      if (!(error instanceof CommandError)) throw error;
      const blamed = blameRestoreFailure(error.stderr, input);
      throw blamed ? error.withHint(`input line ${blamed.line}: ${blamed.text}`) : error;
    }
  }

  /** iptables-save output of one table; with `counters`, each rule's packet and byte counters too (`-c`). */
  async save(table = 'filter', { counters = false } = {}): Promise<string> {
    return (await this.#run(this.binary('save'), ['-t', table, ...(counters ? ['-c'] : [])])).stdout;
  }

  async saveParsed(table = 'filter', options: { counters?: boolean } = {}): Promise<SavedTable> {
    const parsed = parseIptablesSave(await this.save(table, options));
    return parsed.find((candidate) => candidate.name === table) ?? { name: table, chains: [] };
  }

  /** Our chains in `table` (named with `prefix`) and the rules elsewhere that jump into them. */
  async ownChains(table: string, prefix: string): Promise<OwnChains> {
    return selectOwnChains(await this.saveParsed(table), prefix);
  }

  /** Runs the plain iptables binary with `--wait`, for example `['-t', 'filter', '-S']`. */
  async run(args: readonly string[], okExitCodes?: readonly number[]): Promise<CommandResult> {
    return this.#run(this.binary('iptables'), [`--wait=${this.#waitSeconds}`, ...args], undefined, okExitCodes);
  }

  /** Whether `rule` (the words after `-A <chain>`) is in `chain`, via `iptables -C`. */
  async hasRule(table: string, chain: string, rule: readonly string[]): Promise<boolean> {
    const result = await this.run(['-t', table, '-C', chain, ...rule], [1]);
    return result.exitCode === 0;
  }

  /**
   * Whether MASQUERADE and SNAT take `--random-fully` here: iptables 1.6.2 or later, the test kube-router makes (through
   * go-iptables), so that both write the same rule. Asked once per instance.
   */
  hasRandomFully(): Promise<boolean> {
    this.#randomFully ??= this.version().then(
      ({ version }) => compareVersions(version, '1.6.2') >= 0,
      (error: unknown) => {
        this.#randomFully = undefined;
        throw error;
      },
    );
    return this.#randomFully;
  }

  async version(): Promise<IptablesVersion> {
    const { stdout } = await this.#runner.run({
      command: this.binary('iptables'),
      args: ['-V'],
      netns: this.netns,
      timeoutMs: this.#timeoutMs,
    });
    const match = /v(\d+(?:\.\d+)*)\s*(?:\(([^)]+)\))?/.exec(stdout);
    return { version: match?.[1] ?? stdout.trim(), backend: match?.[2] === 'nf_tables' ? 'nf_tables' : 'legacy' };
  }

  #run(
    command: string,
    args: readonly string[],
    input?: string,
    okExitCodes?: readonly number[],
  ): Promise<CommandResult> {
    return this.#lock.runExclusive(() =>
      this.#runner.run({ command, args, input, netns: this.netns, timeoutMs: this.#timeoutMs, okExitCodes }),
    );
  }
}

/** Compares dotted version numbers part by part (`1.10.0` is after `1.6.2`); a missing part counts as 0. */
function compareVersions(a: string, b: string): number {
  const left = a.split('.').map(Number);
  const right = b.split('.').map(Number);
  for (let i = 0; i < Math.max(left.length, right.length); i++) {
    const difference = (left[i] ?? 0) - (right[i] ?? 0);
    if (difference !== 0) return difference;
  }
  return 0;
}
