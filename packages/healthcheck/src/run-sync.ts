import type { HealthComponent } from './registry.js';

export type SyncOutcome =
  | { ok: true; durationMs: number }
  | { ok: false; error: unknown; durationMs: number };

/** Beats once; a long sync calls it whenever it makes progress so that it is not mistaken for a wedged loop. */
export type ProgressBeat = () => void;

/**
 * Runs one sync between two heartbeats: one when it starts and one when it ends, whatever it did (returned, threw or
 * rejected). The beats say only that the loop is not wedged; the outcome is returned for the metrics, and this
 * function never throws.
 */
export async function runSync(
  component: HealthComponent,
  sync: (progress: ProgressBeat) => unknown,
): Promise<SyncOutcome> {
  const started = performance.now();
  component.beat();
  try {
    await sync(() => component.beat());
    return { ok: true, durationMs: performance.now() - started };
  } catch (error) {
    return { ok: false, error, durationMs: performance.now() - started };
  } finally {
    component.beat();
    component.syncEnded();
  }
}
