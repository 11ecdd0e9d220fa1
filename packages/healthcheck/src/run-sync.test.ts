import { describe, expect, it } from 'vitest';
import { HealthRegistry } from './registry.js';
import { runSync } from './run-sync.js';

function component() {
  const registry = new HealthRegistry();
  const handle = registry.register('c', { syncPeriodMs: 1_000 });
  return { handle, beats: () => registry.status('c')?.beats, registry };
}

describe('runSync', () => {
  it('beats at start and end of a successful sync and reports ok', async () => {
    const { handle, beats } = component();
    let beatsDuringSync: number | undefined;
    const outcome = await runSync(handle, () => {
      beatsDuringSync = beats();
    });
    expect(beatsDuringSync).toBe(1);
    expect(beats()).toBe(2);
    expect(outcome.ok).toBe(true);
    expect(outcome.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('beats at both ends when the sync throws synchronously, and returns the error', async () => {
    const { handle, beats } = component();
    const error = new Error('rejected service');
    const outcome = await runSync(handle, () => {
      throw error;
    });
    expect(beats()).toBe(2);
    expect(outcome).toMatchObject({ ok: false, error });
  });

  it('beats at both ends when the sync rejects', async () => {
    const { handle, beats, registry } = component();
    const outcome = await runSync(handle, async () => {
      await new Promise((r) => setTimeout(r, 5));
      throw new Error('stuck peer');
    });
    expect(beats()).toBe(2);
    expect(outcome.ok).toBe(false);
    expect(registry.readinessChecks()).toEqual([{ name: 'c', ok: true }]);
  });

  it('hands the sync a progress callback that beats', async () => {
    const { handle, beats } = component();
    await runSync(handle, (progress) => {
      progress();
      progress();
    });
    expect(beats()).toBe(4);
  });
});
