import { CommandError } from './command.js';
import type { CommandResult, CommandRunner } from './command.js';
import { Mutex } from './mutex.js';
import { parseIpvsConnectionTable, parseIpvsConnections, parseIpvsSave, parseIpvsStats } from './ipvs-rules.js';
import type { IpvsConnectionEntry, IpvsDestinationConnections, IpvsServiceKey, IpvsServiceStats, IpvsVirtualServer } from './ipvs-rules.js';

export interface IpvsadmOptions {
  readonly runner: CommandRunner;
  readonly netns?: string;
  readonly timeoutMs?: number;
  readonly lock?: Mutex;
  /** The ipvsadm binary. */
  readonly command?: string;
}

/** IPVS is one table per network namespace; its writers in this process take turns. */
export const ipvsLock = new Mutex();

/** The outcome of one `ipvsadm -R`: it goes on after a line the kernel refuses, and exits 0 all the same. */
export interface IpvsRestoreResult {
  readonly lines: number;
  /** What ipvsadm wrote about refused lines (it does not say which); empty when every line applied. */
  readonly stderr: string;
  readonly durationMs: number;
}

export interface IpvsTimeouts {
  readonly tcpSeconds: number;
  readonly tcpFinSeconds: number;
  readonly udpSeconds: number;
}

/**
 * ipvsadm, optionally inside a network namespace. There is no maintained IPVS netlink library on npm, so state is read
 * with `ipvsadm -Sn` (one process for the whole table) and changed with `ipvsadm -R` batches (one process for any
 * number of operations).
 */
export class Ipvsadm {
  readonly netns: string | undefined;
  readonly #runner: CommandRunner;
  readonly #timeoutMs: number;
  readonly #lock: Mutex;
  readonly #command: string;

  constructor(options: IpvsadmOptions) {
    this.#runner = options.runner;
    this.netns = options.netns;
    this.#timeoutMs = options.timeoutMs ?? 60_000;
    this.#lock = options.lock ?? ipvsLock;
    this.#command = options.command ?? 'ipvsadm';
  }

  /** Every virtual service with its real servers. */
  async save(): Promise<IpvsVirtualServer[]> {
    return parseIpvsSave((await this.run(['-S', '-n'])).stdout);
  }

  /**
   * Applies `ipvsadm -R` lines (see ipvsRestoreLine). ipvsadm applies every line it can and reports the others on
   * stderr without naming them (exiting 0, or 255 when the last line was refused), so a non-empty `stderr` means
   * "some lines were refused": the caller re-reads the state to learn which. A failure of ipvsadm itself (cannot
   * start, timeout, killed) rejects.
   */
  async restore(lines: readonly string[]): Promise<IpvsRestoreResult> {
    if (lines.length === 0) return { lines: 0, stderr: '', durationMs: 0 };
    for (const line of lines) {
      if (line.includes('\n')) throw new Error(`ipvsadm restore line contains a newline: ${JSON.stringify(line)}`);
    }
    const started = performance.now();
    try {
      const result = await this.run(['-R'], `${lines.join('\n')}\n`);
      return { lines: lines.length, stderr: result.stderr.trim(), durationMs: result.durationMs };
    } catch (error) {
      // It exits non-zero when the last line was refused: still a partial apply, told apart by re-reading the state.
      if (error instanceof CommandError && error.ranAndFailed && error.stderr.trim() !== '') {
        return { lines: lines.length, stderr: error.stderr.trim(), durationMs: Math.round(performance.now() - started) };
      }
      throw error;
    }
  }

  /** Active and inactive connections of every real server (`ipvsadm -Ln`). */
  async connections(): Promise<IpvsDestinationConnections[]> {
    return parseIpvsConnections((await this.run(['-L', '-n'])).stdout);
  }

  /**
   * The connection table (`ipvsadm -Lcn`): which real server each client connection went to; only the entries of
   * `virtual` when given (the rest are skipped before they are parsed: a busy node's table is long).
   */
  async connectionTable(virtual?: IpvsServiceKey): Promise<IpvsConnectionEntry[]> {
    return parseIpvsConnectionTable((await this.run(['-L', '-c', '-n'])).stdout, virtual);
  }

  /** Per virtual service counters since it was created (`ipvsadm -Ln --stats --exact`). */
  async stats(): Promise<IpvsServiceStats[]> {
    return parseIpvsStats((await this.run(['-L', '-n', '--stats', '--exact'])).stdout);
  }

  /** `ipvsadm --set tcp tcpfin udp`; 0 leaves a timeout unchanged. */
  async setTimeouts(timeouts: IpvsTimeouts): Promise<void> {
    await this.run(['--set', String(timeouts.tcpSeconds), String(timeouts.tcpFinSeconds), String(timeouts.udpSeconds)]);
  }

  /** Removes every virtual service (`ipvsadm -C`): only for a node's full cleanup. */
  async clear(): Promise<void> {
    await this.run(['-C']);
  }

  /** Runs ipvsadm with any arguments under the IPVS lock. */
  run(args: readonly string[], input?: string): Promise<CommandResult> {
    return this.#lock.runExclusive(async () => {
      try {
        return await this.#runner.run({
          command: this.#command,
          args,
          timeoutMs: this.#timeoutMs,
          ...(input !== undefined && { input }),
          ...(this.netns !== undefined && { netns: this.netns }),
        });
      } catch (error) {
        if (error instanceof CommandError && /Protocol not available|Can't initialize ipvs/i.test(error.stderr)) {
          throw error.withHint('this kernel has no IPVS (modprobe ip_vs, or test in the QEMU guest tier)');
        }
        throw error;
      }
    });
  }
}
