/** A FIFO async mutex: callers of runExclusive run one at a time, in the order they asked. */
let created = 0;

export class Mutex {
  /** @internal The order in which code that holds several locks takes them (`Nft`): one order, no deadlock. */
  readonly order = created++;
  #tail: Promise<void> = Promise.resolve();
  #holders = 0;

  get locked(): boolean {
    return this.#holders > 0;
  }

  runExclusive<T>(task: () => T | Promise<T>): Promise<T> {
    this.#holders++;
    const result = this.#tail.then(task);
    this.#tail = result.then(
      () => this.#release(),
      () => this.#release(),
    );
    return result;
  }

  #release(): void {
    this.#holders--;
  }
}

/**
 * Tool families whose kernel state must not be changed by two of our commands at once. xtables covers iptables and
 * ip6tables (legacy and nft backends share the xtables lock file and restores of one table must not interleave);
 * ipset restores swap sets by name; nft and ip batches are atomic in the kernel but are serialised anyway so that
 * one agent's transactions apply in the order they were issued (an Nft that writes only its own tables may take their
 * `nftTableLock`s instead, below).
 */
export type ToolFamily = 'xtables' | 'ipset' | 'nft' | 'iproute2';

/** One mutex per tool family for the whole process, shared by every plugin that uses these runners. */
export const toolLocks: Readonly<Record<ToolFamily, Mutex>> = Object.freeze({
  xtables: new Mutex(),
  ipset: new Mutex(),
  nft: new Mutex(),
  iproute2: new Mutex(),
});

const nftTableLocks = new Map<string, Mutex>();

/**
 * The lock of one nftables table (`'<family> <name>'`, e.g. `'ip kube-router-filter-ipv4'`) for the whole process.
 * An Nft that writes only that table takes it instead of `toolLocks.nft`: transactions on two tables then run at
 * once, and each table's still apply in the order they were issued.
 */
export function nftTableLock(table: string): Mutex {
  let lock = nftTableLocks.get(table);
  if (!lock) nftTableLocks.set(table, (lock = new Mutex()));
  return lock;
}
