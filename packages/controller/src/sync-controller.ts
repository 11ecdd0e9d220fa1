import type { ProgressBeat, SyncOutcome } from '@kube-router/healthcheck';
import { isFullSync } from './controller.js';
import type { Controller, ControllerStartContext, PluginContext, SyncReason } from './controller.js';
import { setLongTimeout, type LongTimer } from './long-timer.js';

/** What a plugin's plain sync receives. */
export interface SyncContext {
  reason: SyncReason;
  /** A full sync (isFullSync): read the kernel back and repair drift instead of trusting the last write. */
  full: boolean;
  /** Beats: call it while a long sync makes progress. */
  progress: ProgressBeat;
  /** Aborted when the sync times out or the agent stops; pass it to long operations. */
  signal: AbortSignal;
  /**
   * Reports kernel objects of one kind (`route`, `ipvs_service`, `chain`, `ipset`, ...) that this sync found changed
   * or removed by someone else and put back: one warning line per kind and sync naming a few of them, and
   * kube_router_controller_drift_repaired_total{controller,object}. Nothing is reported for an empty list.
   */
  driftRepaired(object: string, names: readonly string[]): void;
}

/** How many repaired objects a drift line names; the count covers them all. */
const DRIFT_NAMES_LOGGED = 10;

export interface SyncControllerSpec {
  name: string;
  syncPeriodMs: number;
  /** Default 1 s. */
  minSyncIntervalMs?: number;
  /**
   * A sync that has not ended by then fails with a SyncTimeoutError and its signal is aborted. Default: the sync
   * period. 0 disables the bound.
   */
  syncTimeoutMs?: number;
  /** Extra health grace for this controller (see HealthRegistry). */
  healthGraceMs?: number;
  /** One full, level-triggered sync. It throws (a JoinedSyncError, ideally) when anything failed. */
  sync(ctx: SyncContext): Promise<void>;
  start?(ctx: ControllerStartContext): Promise<void> | void;
  stop?(): Promise<void> | void;
}

export class SyncTimeoutError extends Error {
  constructor(controller: string, timeoutMs: number) {
    super(`${controller}: sync did not end within ${timeoutMs} ms`);
    this.name = 'SyncTimeoutError';
  }
}

/**
 * Builds a Controller from a plain `sync()`: the returned runObservedSync registers the health component, beats at
 * both ends of every sync, records the outcome, bounds the sync by a timeout and never throws. Syncs of one controller
 * never overlap, whoever asks (the scheduler, a test, a start-up path): a call made while one runs waits for it, so a
 * plugin needs no lock of its own around its state.
 *
 * A sync that ignores its abort signal and keeps running after its timeout still holds the loop: the next sync waits
 * for it without beating, so a truly wedged controller goes stale and /healthz reports it.
 */
export function createSyncController(ctx: PluginContext, spec: SyncControllerSpec): Controller {
  const component = ctx.health.register(spec.name, {
    syncPeriodMs: spec.syncPeriodMs,
    ...(spec.healthGraceMs !== undefined && { graceMs: spec.healthGraceMs }),
  });
  const timeoutMs = spec.syncTimeoutMs ?? spec.syncPeriodMs;
  const stopping = new AbortController();
  let unfinished: Promise<unknown> | undefined;
  // The tail of the calls to runObservedSync: each waits for the one before it.
  let previous: Promise<unknown> = Promise.resolve();
  let stopped = false;

  const driftRepaired = (object: string, names: readonly string[]): void => {
    if (names.length === 0) return;
    ctx.metrics.recordDriftRepaired(spec.name, object, names.length);
    ctx.logger.warn(
      { object, count: names.length, names: names.slice(0, DRIFT_NAMES_LOGGED) },
      'repaired kernel state changed behind the controller',
    );
  };

  const boundedSync = async (reason: SyncReason, progress: ProgressBeat): Promise<void> => {
    // One controller per sync, linked to `stopping` by hand: AbortSignal.any keeps every combined signal alive for
    // as long as the long-lived one, which over months of syncs is a leak.
    const aborter = new AbortController();
    const onStop = () => aborter.abort(stopping.signal.reason);
    if (stopping.signal.aborted) onStop();
    else stopping.signal.addEventListener('abort', onStop, { once: true });
    try {
      await syncWithin(reason, progress, aborter);
    } finally {
      stopping.signal.removeEventListener('abort', onStop);
    }
  };

  const syncWithin = async (reason: SyncReason, progress: ProgressBeat, aborter: AbortController): Promise<void> => {
    const running = spec.sync({ reason, full: isFullSync(reason), progress, signal: aborter.signal, driftRepaired });
    if (timeoutMs <= 0) return running;
    let timer: LongTimer | undefined;
    let timedOut: SyncTimeoutError | undefined;
    const deadline = new Promise<void>((resolve) => {
      // The timeout defaults to the period, which may be longer than Node's timers can wait (720h).
      timer = setLongTimeout(() => {
        timedOut = new SyncTimeoutError(spec.name, timeoutMs);
        resolve();
      }, timeoutMs);
    });
    try {
      await Promise.race([running, deadline]);
    } finally {
      timer?.clear();
    }
    if (timedOut) {
      // Abort after deciding the outcome: a sync that gives up on abort still timed out.
      aborter.abort(timedOut);
      const settled: Promise<void> = running
        .then(
          () => undefined,
          () => undefined,
        )
        .finally(() => {
          if (unfinished === settled) unfinished = undefined;
        });
      unfinished = settled;
      throw timedOut;
    }
  };

  const observedSync = async (reason: SyncReason): Promise<SyncOutcome> => {
    // A call queued behind the last sync when the controller stopped: the kernel is no longer this controller's to
    // touch. Not a sync, so neither a beat nor an outcome.
    if (stopped) return { ok: false, error: new Error(`${spec.name}: stopped`), durationMs: 0 };
    if (unfinished) await unfinished;
    const outcome = await ctx.metrics.runObservedSync(component, (progress) => boundedSync(reason, progress));
    if (!outcome.ok) ctx.logger.warn({ err: outcome.error, reason, durationMs: outcome.durationMs }, 'sync failed');
    else ctx.logger.debug({ reason, durationMs: outcome.durationMs }, 'sync ended');
    return outcome;
  };

  return {
    name: spec.name,
    syncPeriodMs: spec.syncPeriodMs,
    minSyncIntervalMs: spec.minSyncIntervalMs ?? 1000,
    async start(startCtx) {
      // The agent aborts this signal when it stops: a running sync learns it at once instead of after its timeout.
      startCtx.signal.addEventListener('abort', () => stopping.abort(startCtx.signal.reason), { once: true });
      await spec.start?.(startCtx);
    },
    runObservedSync(reason): Promise<SyncOutcome> {
      const turn = previous.then(() => observedSync(reason));
      // A turn never rejects (runObservedSync never throws), but if one ever did, the next must still run.
      previous = turn.catch(() => undefined);
      return turn;
    },
    async stop() {
      stopped = true;
      stopping.abort(new Error('agent stopping'));
      // The running sync (aborted) and the calls queued behind it (which now end at once) end before spec.stop.
      await previous;
      if (unfinished) await unfinished;
      await spec.stop?.();
    },
  };
}
