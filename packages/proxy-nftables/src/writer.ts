import { CommandError } from '@kube-router/netfilter';
import type { Nft } from '@kube-router/netfilter';
import type { NftRuleset } from '@kube-router/netfilter';
import type { TableState } from './render.js';
import { diffScript, driftOf, fullScript } from './script.js';
import type { Drift } from './script.js';

/**
 * How long a flushed Service chain waits before it is deleted: kernels before 6.2 notice only a little after a
 * transaction that a deleted map element no longer refers to its chain, and refuse to delete it until then (kube-proxy
 * waits a second for the same reason).
 */
export const STALE_CHAIN_DELAY_MS = 1_000;

export interface WriteReport {
  readonly mode: 'full' | 'partial' | 'unchanged';
  /** Statements written for Services (the fixed part aside). */
  readonly operations: number;
  /** Full writes only: what the kernel showed that differed from what was last written. */
  readonly drift: Drift | undefined;
  readonly nftMs: number;
}

/**
 * Keeps one family's table. It remembers what it wrote: an event sync writes the difference in one transaction and never
 * lists the table; a full sync lists it, reports drift against what was written, and writes everything again in one
 * transaction. After a restart the first sync is full and adopts the table (same names, same content: no gap).
 */
export class TableWriter {
  readonly table: string;
  #written: TableState | undefined;
  readonly #stale = new Map<string, number>();
  readonly #nft: Nft;
  readonly #now: () => number;

  constructor(nft: Nft, family: 'ip' | 'ip6', name: string, now: () => number = Date.now) {
    this.#nft = nft;
    this.table = `${family} ${name}`;
    this.#now = now;
  }

  /** What was last written (undefined before the first write, and after a failed one). */
  get written(): TableState | undefined {
    return this.#written;
  }

  /** Flushed chains waiting to be deleted. */
  get staleChains(): number {
    return this.#stale.size;
  }

  async write(desired: TableState, full: boolean): Promise<WriteReport> {
    const written = this.#written;
    if (full || !written) return this.#writeFull(desired, written);
    const diff = diffScript(this.table, written, desired);
    for (const chain of diff.addedChains) this.#stale.delete(chain);
    if (diff.script === '') return { mode: 'unchanged', operations: 0, drift: undefined, nftMs: 0 };
    // A failed write leaves the kernel unknown: the next sync lists it and writes it all.
    this.#written = undefined;
    const result = await this.#nft.apply(diff.script);
    this.#written = desired;
    for (const chain of diff.staleChains) this.#stale.set(chain, this.#now());
    return { mode: 'partial', operations: diff.operations, drift: undefined, nftMs: result.durationMs };
  }

  /** Checks a script with `nft -c` (the kernel evaluates it and commits nothing). */
  async check(script: string): Promise<void> {
    await this.#nft.check(script);
  }

  /** Deletes the flushed chains whose wait is over, one transaction; those the kernel still refuses stay for later. */
  async deleteStaleChains(): Promise<void> {
    const due = [...this.#stale].filter(([, since]) => this.#now() - since >= STALE_CHAIN_DELAY_MS).map(([chain]) => chain);
    if (due.length === 0) return;
    await this.#nft.apply(due.map((chain) => `delete chain ${this.table} ${chain}\n`).join(''));
    for (const chain of due) this.#stale.delete(chain);
  }

  async #writeFull(desired: TableState, written: TableState | undefined): Promise<WriteReport> {
    const { listing, counters } = (await this.#list()) ?? {};
    const drift = written && listing ? driftOf(listing, written, new Set(this.#stale.keys())) : undefined;
    const listed = { chains: new Set(listing?.chains.map((chain) => chain.name)), sets: new Set(listing?.sets.map((set) => set.name)), counters };
    const { script, staleChains } = fullScript(this.table, desired, listed);
    this.#written = undefined;
    const result = await this.#nft.apply(script);
    this.#written = desired;
    for (const chain of desired.chains.keys()) this.#stale.delete(chain);
    for (const chain of staleChains) if (!this.#stale.has(chain)) this.#stale.set(chain, this.#now());
    // A stale chain that is gone already (someone deleted it) needs no delete.
    for (const chain of this.#stale.keys()) if (!listed.chains.has(chain) && !staleChains.includes(chain)) this.#stale.delete(chain);
    return { mode: 'full', operations: desired.chains.size, drift, nftMs: result.durationMs };
  }

  /** The table as the kernel has it, with the names of its counters; undefined when there is none yet. */
  async #list(): Promise<{ listing: NftRuleset; counters: Set<string> } | undefined> {
    try {
      const listing = await this.#nft.list(['table', ...this.table.split(' ')]);
      return { listing, counters: new Set(listing.counters.map((counter) => counter.name)) };
    } catch (error) {
      if (error instanceof CommandError && /No such file or directory/.test(error.stderr)) return undefined;
      throw error;
    }
  }
}
