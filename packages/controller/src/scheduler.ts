import type { SyncOutcome } from '@kube-router/healthcheck';
import type { Controller, SyncReason } from './controller.js';
import { setLongTimeout } from './long-timer.js';

export interface SchedulerOptions {
  /** First retry delay after a failed sync; doubles up to maxBackoffMs. Default 1 s. */
  initialBackoffMs?: number;
  /** Default: the controller's sync period, so that retries never come less often than periodic syncs. */
  maxBackoffMs?: number;
  /** Called after every sync, for logs and tests. */
  onSync?: (reason: SyncReason, outcome: SyncOutcome) => void;
}

/**
 * Owns one controller's loop, in the manner of kube-proxy's BoundedFrequencyRunner: an initial sync, then a periodic
 * sync every syncPeriod (however many triggered syncs ran between) and at most one sync every minSyncInterval;
 * requests coalesce into one pending sync; failures are retried with capped exponential backoff; two syncs of one
 * controller never overlap.
 */
export class SyncScheduler {
  readonly #controller: Controller;
  readonly #initialBackoffMs: number;
  readonly #maxBackoffMs: number;
  readonly #onSync: SchedulerOptions['onSync'];
  #pending: string | undefined;
  #retryAt: number | undefined;
  #backoffMs = 0;
  #lastStart = -Infinity;
  #lastEnd = 0;
  /**
   * When the last initial or periodic sync ended: the period counts from there, not from the last sync of any kind.
   * Controllers do their full work (reading the kernel back to repair drift) on periodic syncs, and on a busy
   * cluster, where some object changes every few seconds, triggered syncs would otherwise put the periodic one off
   * for ever. kube-router's periodic sync is a ticker that events do not reset either.
   */
  #lastPeriodicEnd = 0;
  #stopped = false;
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;
  #syncs = 0;

  constructor(controller: Controller, options: SchedulerOptions = {}) {
    this.#controller = controller;
    this.#initialBackoffMs = options.initialBackoffMs ?? 1000;
    this.#maxBackoffMs = options.maxBackoffMs ?? controller.syncPeriodMs;
    this.#onSync = options.onSync;
  }

  /** Number of syncs that have ended. */
  get syncs(): number {
    return this.#syncs;
  }

  /** Starts the loop with the initial sync. */
  start(): void {
    if (this.#loop) throw new Error(`${this.#controller.name}: scheduler already started`);
    this.#loop = this.#run();
  }

  /** Requests a sync. At most one request is pending; later ones before it runs are coalesced into it. */
  requestSync(reason: string): void {
    if (this.#stopped) return;
    this.#pending ??= reason;
    this.#wake?.();
  }

  /**
   * Starts no further sync, without waiting. An agent that stops several controllers halts them all first, so that
   * none begins a sync while it waits for another to end.
   */
  halt(): void {
    this.#stopped = true;
    this.#wake?.();
  }

  /** Stops the loop after the running sync (if any) has ended, then stops the controller. */
  async stop(): Promise<void> {
    this.halt();
    await this.#loop;
    await this.#controller.stop();
  }

  async #run(): Promise<void> {
    // The initial sync serves every request made before it, such as the informers' first notifications.
    let reason: SyncReason | undefined = this.#take('initial');
    while (!this.#stopped) {
      reason ??= await this.#nextReason();
      if (reason === undefined) break;
      this.#lastStart = performance.now();
      const outcome = await this.#observe(reason);
      this.#lastEnd = performance.now();
      if (reason === 'initial' || reason === 'periodic') this.#lastPeriodicEnd = this.#lastEnd;
      this.#syncs++;
      if (outcome.ok) {
        this.#backoffMs = 0;
        this.#retryAt = undefined;
      } else {
        this.#backoffMs = Math.min(
          this.#backoffMs === 0 ? this.#initialBackoffMs : this.#backoffMs * 2,
          this.#maxBackoffMs,
        );
        this.#retryAt = this.#lastEnd + this.#backoffMs;
      }
      try {
        this.#onSync?.(reason, outcome);
      } catch {
        // An observer's mistake must not end the loop.
      }
      reason = undefined;
    }
  }

  /** runObservedSync must never throw; one that does (a hand-written controller) still counts as a failed sync. */
  async #observe(reason: SyncReason): Promise<SyncOutcome> {
    const started = performance.now();
    try {
      return await this.#controller.runObservedSync(reason);
    } catch (error) {
      return { ok: false, error, durationMs: performance.now() - started };
    }
  }

  /** Waits until a sync is due and says why; undefined once stopped. */
  async #nextReason(): Promise<SyncReason | undefined> {
    for (;;) {
      if (this.#stopped) return undefined;
      const now = performance.now();
      const periodicAt = this.#lastPeriodicEnd + this.#controller.syncPeriodMs;
      const earliest = this.#lastStart + this.#controller.minSyncIntervalMs;
      // The periodic sync respects the minimum interval too: due while a triggered sync ran, it waits its turn.
      if (now >= Math.max(periodicAt, earliest)) return this.#take('periodic');
      if (this.#retryAt !== undefined && now >= Math.max(this.#retryAt, earliest)) return this.#take('retry');
      if (this.#pending !== undefined && now >= earliest) return this.#take(this.#pending);
      let dueAt = Math.max(periodicAt, earliest);
      if (this.#retryAt !== undefined) dueAt = Math.min(dueAt, Math.max(this.#retryAt, earliest));
      if (this.#pending !== undefined) dueAt = Math.min(dueAt, earliest);
      await this.#sleep(dueAt - now);
    }
  }

  #take(reason: SyncReason): SyncReason {
    // Any sync serves every pending request and the retry: each sync is a full, level-triggered one.
    this.#pending = undefined;
    this.#retryAt = undefined;
    return reason;
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      // A period may be longer than Node's timers can wait (--ipvs-sync-period=720h).
      const timer = setLongTimeout(done, ms);
      function done() {
        timer.clear();
        resolve();
      }
      this.#wake = () => {
        this.#wake = undefined;
        done();
      };
    });
  }
}
