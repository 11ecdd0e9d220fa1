/**
 * Runs work per key, never twice at once for one key; requests that arrive while a key's work runs are coalesced
 * into one more run (client-go's workqueue semantics, without the rate limiting).
 */
export class KeyedQueue {
  private readonly running = new Map<string, Promise<void>>();
  private readonly dirty = new Set<string>();

  /** `work` handles its own failures (retries, reporting); one that throws only ends that key's current run. */
  constructor(private readonly work: (key: string) => Promise<void>) {}

  enqueue(key: string): void {
    if (this.running.has(key)) {
      this.dirty.add(key);
      return;
    }
    const run = (async () => {
      try {
        do {
          this.dirty.delete(key);
          await this.work(key);
        } while (this.dirty.has(key));
      } finally {
        this.running.delete(key);
        this.dirty.delete(key);
      }
    })();
    this.running.set(key, run);
  }

  /** Resolves once no key has work running or pending. */
  async drain(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running.values()]);
  }
}
