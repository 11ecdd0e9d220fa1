/**
 * What had been handed over when gobgpd last restarted, kept for a grace period (or until a peer withdraws a
 * destination explicitly) so that traffic keeps its routes while the new gobgpd relearns them: gobgpd waits 5-10 s
 * before it dials a peer, and the peer then resends everything.
 */
export class RestartGrace<T> {
  #kept = new Map<string, T>();
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly graceMs: number,
    /** The grace ran out: what was kept is gone, and whoever merged it in must recompute. */
    private readonly onExpired: () => void,
  ) {}

  /**
   * Keeps `entries` for the grace period, replacing what an earlier restart kept. Nothing handed over, nothing to
   * keep: an earlier restart's grace then runs on untouched.
   */
  keep(entries: ReadonlyMap<string, T>): void {
    if (entries.size === 0) return;
    this.#kept = new Map(entries);
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#kept = new Map();
      this.onExpired();
    }, this.graceMs);
  }

  /** A peer withdrew the destination: what it taught the old gobgpd no longer holds. */
  drop(key: string): void {
    this.#kept.delete(key);
  }

  entries(): IterableIterator<[string, T]> {
    return this.#kept.entries();
  }

  stop(): void {
    clearTimeout(this.#timer);
  }
}
