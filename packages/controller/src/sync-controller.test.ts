import { describe, expect, it } from 'vitest';
import { runControllerContractSuite, sample } from './contract.js';
import { createSyncController, SyncTimeoutError } from './sync-controller.js';
import { SyncFailures } from './sync-error.js';
import { testContext } from './testing/context.js';

/**
 * A small but honest plugin for the contract suite: it "programs" a list of objects into a table, attempting every
 * object even when some fail, and its faults break the table itself.
 */
function tablePlugin() {
  const ctx = testContext();
  const table = new Map<string, string>();
  let mode: 'ok' | 'fail' | 'hang' = 'ok';
  let releaseHang: (() => void) | undefined;
  const controller = createSyncController(ctx, {
    name: 'table',
    syncPeriodMs: 60_000,
    syncTimeoutMs: 300,
    async sync({ signal }) {
      const failures = new SyncFailures();
      for (const key of ['a', 'b', 'c']) {
        await failures.attempt(`object/${key}`, async () => {
          if (mode === 'fail') throw new Error(`table rejected ${key}`);
          if (mode === 'hang') {
            await new Promise<void>((resolve, reject) => {
              releaseHang = resolve;
              signal.addEventListener('abort', () => reject(signal.reason), { once: true });
            });
          }
          table.set(key, 'programmed');
        });
      }
      failures.throwIfAny('table');
    },
  });
  return {
    controller,
    health: ctx.health,
    metrics: ctx.metrics,
    table,
    faults: {
      fail: () => void (mode = 'fail'),
      hang: () => void (mode = 'hang'),
      heal: () => {
        mode = 'ok';
        releaseHang?.();
      },
    },
    teardown: async () => undefined,
  };
}

runControllerContractSuite({ name: 'table (example plugin)', setup: async () => tablePlugin(), hangBoundMs: 2_000 });

describe('createSyncController', () => {
  it('joins per-object failures and still programs the rest', async () => {
    const ctx = testContext();
    const programmed: string[] = [];
    const controller = createSyncController(ctx, {
      name: 'partial',
      syncPeriodMs: 1_000,
      async sync() {
        const failures = new SyncFailures();
        await failures.attemptEach(['x', 'bad', 'y'], (k) => `object/${k}`, (k) => {
          if (k === 'bad') throw new Error('malformed');
          programmed.push(k);
        });
        failures.throwIfAny();
      },
    });
    const outcome = await controller.runObservedSync('test');
    expect(programmed).toEqual(['x', 'y']);
    expect(outcome.ok).toBe(false);
    if (!outcome.ok) expect(String(outcome.error)).toContain('object/bad: malformed');
    expect(await sample(ctx.metrics, 'kube_router_controller_sync_failures_total', 'partial')).toBe(1);
  });

  it('aborts the signal of a sync that times out', async () => {
    const ctx = testContext();
    let aborted: unknown;
    const controller = createSyncController(ctx, {
      name: 'slow',
      syncPeriodMs: 1_000,
      syncTimeoutMs: 50,
      sync: ({ signal }) =>
        new Promise<void>((resolve) => {
          signal.addEventListener('abort', () => {
            aborted = signal.reason;
            resolve();
          });
        }),
    });
    const outcome = await controller.runObservedSync('test');
    expect(outcome.ok).toBe(false);
    expect(aborted).toBeInstanceOf(SyncTimeoutError);
  });

  it('holds the loop, without beating, while a timed-out sync that ignores its signal is still running', async () => {
    const ctx = testContext();
    let finish: (() => void) | undefined;
    let calls = 0;
    const controller = createSyncController(ctx, {
      name: 'wedged',
      syncPeriodMs: 1_000,
      syncTimeoutMs: 20,
      sync: () => {
        calls++;
        return calls === 1 ? new Promise<void>((resolve) => (finish = resolve)) : Promise.resolve();
      },
    });
    expect((await controller.runObservedSync('first')).ok).toBe(false);
    const beatsAfterTimeout = ctx.health.status('wedged')?.beats;
    const second = controller.runObservedSync('second');
    await new Promise((r) => setTimeout(r, 100));
    expect(calls).toBe(1);
    expect(ctx.health.status('wedged')?.beats).toBe(beatsAfterTimeout);
    finish?.();
    expect((await second).ok).toBe(true);
    expect(calls).toBe(2);
  });

  it('aborts a running sync as soon as the agent stops, without waiting for its timeout', async () => {
    const ctx = testContext();
    const stopping = new AbortController();
    let aborted = false;
    const controller = createSyncController(ctx, {
      name: 'long',
      syncPeriodMs: 60_000,
      syncTimeoutMs: 0,
      sync: ({ signal }) =>
        new Promise<void>((_, reject) =>
          signal.addEventListener('abort', () => {
            aborted = true;
            reject(signal.reason);
          }),
        ),
    });
    await controller.start({ requestSync: () => undefined, signal: stopping.signal });
    const running = controller.runObservedSync('test');
    await new Promise((r) => setTimeout(r, 20));
    stopping.abort(new Error('agent stopping'));
    const outcome = await running;
    expect(aborted).toBe(true);
    expect(outcome.ok).toBe(false);
  });

  it('bounds a sync by a period longer than Node timers take (720h) without failing it at once', async () => {
    const ctx = testContext();
    const controller = createSyncController(ctx, {
      name: 'monthly',
      syncPeriodMs: 720 * 3_600_000,
      sync: () => new Promise((r) => setTimeout(r, 50)),
    });
    const outcome = await controller.runObservedSync('test');
    expect(outcome.ok ? undefined : outcome.error).toBeUndefined();
  });

  it('runs without a bound when syncTimeoutMs is 0', async () => {
    const ctx = testContext();
    const controller = createSyncController(ctx, {
      name: 'unbounded',
      syncPeriodMs: 10,
      syncTimeoutMs: 0,
      sync: () => new Promise((r) => setTimeout(r, 60)),
    });
    expect((await controller.runObservedSync('test')).ok).toBe(true);
  });
});

describe('createSyncController serialises syncs', () => {
  it('runs one sync at a time, in the order asked, however many callers ask at once', async () => {
    let running = 0;
    let overlapped = false;
    const order: string[] = [];
    const controller = createSyncController(testContext(), {
      name: 'serial',
      syncPeriodMs: 60_000,
      async sync({ reason }) {
        running += 1;
        if (running > 1) overlapped = true;
        await new Promise((resolve) => setTimeout(resolve, 5));
        order.push(reason);
        running -= 1;
      },
    });
    const outcomes = await Promise.all(['a', 'b', 'c', 'd'].map((reason) => controller.runObservedSync(reason)));
    expect(outcomes.every((outcome) => outcome.ok)).toBe(true);
    expect(overlapped).toBe(false);
    expect(order).toEqual(['a', 'b', 'c', 'd']);
  });

  it('goes on with the next sync after one that failed', async () => {
    const controller = createSyncController(testContext(), {
      name: 'serial-failing',
      syncPeriodMs: 60_000,
      sync: ({ reason }) => (reason === 'bad' ? Promise.reject(new Error('rejected')) : Promise.resolve()),
    });
    const [bad, good] = await Promise.all([controller.runObservedSync('bad'), controller.runObservedSync('good')]);
    expect(bad.ok).toBe(false);
    expect(good.ok).toBe(true);
  });

  it('tells the sync whether it is a full one: initial, periodic and retry are; an event is not', async () => {
    const seen: Record<string, boolean> = {};
    const controller = createSyncController(testContext(), {
      name: 'full-flag',
      syncPeriodMs: 60_000,
      sync: async ({ reason, full }) => void (seen[reason] = full),
    });
    for (const reason of ['initial', 'periodic', 'retry', 'pods changed']) await controller.runObservedSync(reason);
    expect(seen).toEqual({ initial: true, periodic: true, retry: true, 'pods changed': false });
  });
});

describe('drift reports', () => {
  it('count repaired objects by kind on the agent\'s registry and log one line per kind', async () => {
    const ctx = testContext();
    const controller = createSyncController(ctx, {
      name: 'drifting',
      syncPeriodMs: 60_000,
      sync: async ({ driftRepaired }) => {
        driftRepaired('route', ['10.244.1.0/24 via 10.250.0.12', '10.244.2.0/24 via 10.250.0.13']);
        driftRepaired('ipset', []);
      },
    });
    await controller.runObservedSync('periodic');
    await controller.runObservedSync('periodic');
    const text = await ctx.metrics.registry.metrics();
    expect(text).toContain('kube_router_controller_drift_repaired_total{controller="drifting",object="route"} 4');
    expect(text).not.toContain('object="ipset"');
  });
});

describe('createSyncController stops', () => {
  it('after the running sync, and runs none of the calls queued behind it', async () => {
    let release!: () => void;
    const started: string[] = [];
    const controller = createSyncController(testContext(), {
      name: 'stopping',
      syncPeriodMs: 60_000,
      syncTimeoutMs: 0,
      async sync({ reason }) {
        started.push(reason);
        if (reason === 'first') await new Promise<void>((resolve) => (release = resolve));
      },
    });
    await controller.start({ requestSync: () => undefined, signal: new AbortController().signal });
    const first = controller.runObservedSync('first');
    const queued = controller.runObservedSync('queued');
    await new Promise((resolve) => setTimeout(resolve, 10));
    const stopping = controller.stop();
    release();
    await stopping;
    expect((await first).ok).toBe(true);
    expect((await queued).ok).toBe(false);
    expect(started).toEqual(['first']);
  });
});
