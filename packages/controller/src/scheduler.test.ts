import { afterEach, describe, expect, it } from 'vitest';
import type { SyncOutcome } from '@kube-router/healthcheck';
import type { Controller, SyncReason } from './controller.js';
import { SyncScheduler } from './scheduler.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A controller that records every sync; its behaviour per call is scripted. */
function recordingController(opts: {
  syncPeriodMs?: number;
  minSyncIntervalMs?: number;
  durationMs?: number;
  fail?: (call: number) => boolean;
}) {
  const calls: { reason: SyncReason; at: number }[] = [];
  let running = 0;
  let maxConcurrent = 0;
  let stopped = false;
  const started = performance.now();
  const controller: Controller = {
    name: 'rec',
    syncPeriodMs: opts.syncPeriodMs ?? 60_000,
    minSyncIntervalMs: opts.minSyncIntervalMs ?? 0,
    async start() {},
    async runObservedSync(reason): Promise<SyncOutcome> {
      calls.push({ reason, at: performance.now() - started });
      running++;
      maxConcurrent = Math.max(maxConcurrent, running);
      await sleep(opts.durationMs ?? 0);
      running--;
      const ok = !opts.fail?.(calls.length);
      return ok ? { ok, durationMs: 0 } : { ok, error: new Error('x'), durationMs: 0 };
    },
    async stop() {
      stopped = true;
    },
  };
  return { controller, calls, maxConcurrent: () => maxConcurrent, isStopped: () => stopped, isRunning: () => running > 0 };
}

let scheduler: SyncScheduler | undefined;
afterEach(async () => {
  await scheduler?.stop();
  scheduler = undefined;
});

describe('SyncScheduler', () => {
  it('runs an initial sync, then at least every sync period', async () => {
    const rec = recordingController({ syncPeriodMs: 50 });
    scheduler = new SyncScheduler(rec.controller);
    scheduler.start();
    await sleep(190);
    expect(rec.calls[0]?.reason).toBe('initial');
    expect(rec.calls.filter((c) => c.reason === 'periodic').length).toBeGreaterThanOrEqual(2);
  });

  it('syncs periodically however often triggered syncs come: they do not put the periodic sync off', async () => {
    const rec = recordingController({ syncPeriodMs: 100 });
    scheduler = new SyncScheduler(rec.controller);
    scheduler.start();
    // A request every 20 ms: a sync ends well within each period, every time.
    const started = performance.now();
    while (performance.now() - started < 450) {
      scheduler.requestSync('cluster changed');
      await sleep(20);
    }
    expect(rec.calls.filter((c) => c.reason === 'cluster changed').length).toBeGreaterThanOrEqual(10);
    expect(rec.calls.filter((c) => c.reason === 'periodic').length).toBeGreaterThanOrEqual(3);
  });

  it('keeps the minimum interval before a periodic sync that came due while a triggered one ran', async () => {
    const rec = recordingController({ syncPeriodMs: 60, minSyncIntervalMs: 100, durationMs: 80 });
    scheduler = new SyncScheduler(rec.controller);
    scheduler.start();
    const started = performance.now();
    while (performance.now() - started < 600) {
      scheduler.requestSync('cluster changed');
      await sleep(15);
    }
    const starts = rec.calls.map((call) => call.at);
    expect(rec.calls.some((call) => call.reason === 'periodic')).toBe(true);
    for (let index = 1; index < starts.length; index++) {
      expect((starts[index] as number) - (starts[index - 1] as number)).toBeGreaterThanOrEqual(95);
    }
  });

  it('waits a period longer than Node timers take (720h) instead of syncing in a loop', async () => {
    const rec = recordingController({ syncPeriodMs: 720 * 3_600_000 });
    scheduler = new SyncScheduler(rec.controller);
    scheduler.start();
    await sleep(150);
    expect(rec.calls.map((c) => c.reason)).toEqual(['initial']);
  });

  it('coalesces requests into one pending sync and never runs two at once', async () => {
    const rec = recordingController({ durationMs: 80 });
    scheduler = new SyncScheduler(rec.controller);
    scheduler.start();
    await sleep(10);
    for (let i = 0; i < 50; i++) scheduler.requestSync(`event-${i}`);
    await sleep(300);
    expect(rec.calls.map((c) => c.reason)).toEqual(['initial', 'event-0']);
    expect(rec.maxConcurrent()).toBe(1);
  });

  it('runs triggered syncs at most every minimum interval', async () => {
    const rec = recordingController({ minSyncIntervalMs: 100 });
    scheduler = new SyncScheduler(rec.controller);
    scheduler.start();
    const until = performance.now() + 350;
    while (performance.now() < until) {
      scheduler.requestSync('event');
      await sleep(5);
    }
    const gaps = rec.calls.slice(1).map((c, i) => c.at - rec.calls[i]!.at);
    expect(rec.calls.length).toBeGreaterThanOrEqual(3);
    expect(rec.calls.length).toBeLessThanOrEqual(5);
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(95);
  });

  it('retries failures with a capped exponential backoff', async () => {
    const rec = recordingController({ fail: () => true, syncPeriodMs: 60_000 });
    scheduler = new SyncScheduler(rec.controller, { initialBackoffMs: 20, maxBackoffMs: 80 });
    scheduler.start();
    await sleep(700);
    const gaps = rec.calls.slice(1).map((c, i) => c.at - rec.calls[i]!.at);
    expect(rec.calls.slice(1).every((c) => c.reason === 'retry')).toBe(true);
    expect(gaps[0]).toBeGreaterThanOrEqual(18);
    expect(gaps[1]).toBeGreaterThanOrEqual(38);
    expect(gaps[2]).toBeGreaterThanOrEqual(78);
    // Capped: later gaps stay near the cap rather than doubling on.
    for (const gap of gaps.slice(3)) expect(gap).toBeLessThan(150);
  });

  it('serves requests made before start with the initial sync instead of a second one', async () => {
    const rec = recordingController({});
    scheduler = new SyncScheduler(rec.controller);
    scheduler.requestSync('informers synced');
    scheduler.start();
    await sleep(100);
    expect(rec.calls.map((c) => c.reason)).toEqual(['initial']);
  });

  it('keeps its loop when a controller breaks the contract and throws, counting it as a failure', async () => {
    const outcomes: boolean[] = [];
    let calls = 0;
    const throwing: Controller = {
      name: 'throwing',
      syncPeriodMs: 60_000,
      minSyncIntervalMs: 0,
      async start() {},
      async runObservedSync() {
        calls++;
        throw new Error('broken controller');
      },
      async stop() {},
    };
    scheduler = new SyncScheduler(throwing, { initialBackoffMs: 10, onSync: (_r, o) => outcomes.push(o.ok) });
    scheduler.start();
    await sleep(100);
    expect(calls).toBeGreaterThanOrEqual(3);
    expect(outcomes.every((ok) => !ok)).toBe(true);
  });

  it('starts no sync once halted, even while another scheduler is being waited for', async () => {
    const rec = recordingController({ syncPeriodMs: 20 });
    scheduler = new SyncScheduler(rec.controller);
    scheduler.start();
    await sleep(10);
    scheduler.halt();
    const calls = rec.calls.length;
    await sleep(100);
    expect(rec.calls.length).toBe(calls);
  });

  it('stops after the running sync ends, then stops the controller', async () => {
    const rec = recordingController({ durationMs: 100 });
    scheduler = new SyncScheduler(rec.controller);
    scheduler.start();
    await sleep(20);
    expect(rec.isRunning()).toBe(true);
    await scheduler.stop();
    expect(rec.isRunning()).toBe(false);
    expect(rec.isStopped()).toBe(true);
    scheduler.requestSync('late');
    await sleep(20);
    expect(rec.calls).toHaveLength(1);
    scheduler = undefined;
  });
});
