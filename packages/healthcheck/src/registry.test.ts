import { describe, expect, it } from 'vitest';
import { HealthRegistry } from './registry.js';

function clock(start = 1_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

describe('HealthRegistry', () => {
  it('judges a component that has not beaten yet from its registration', () => {
    const t = clock();
    const registry = new HealthRegistry({ now: t.now, defaultGraceMs: 5_000 });
    registry.register('netpol', { syncPeriodMs: 10_000 });
    t.advance(15_000);
    expect(registry.livenessChecks()).toEqual([{ name: 'netpol', ok: true }]);
    t.advance(1);
    const [check] = registry.livenessChecks();
    expect(check?.ok).toBe(false);
    expect(check?.reason).toBe('no heartbeat since registration 15.0s ago, window 15.0s');
  });

  it('restarts the clock of components that have not beaten yet, and only theirs', () => {
    const t = clock();
    const registry = new HealthRegistry({ now: t.now, defaultGraceMs: 0 });
    registry.register('waiting', { syncPeriodMs: 1_000 });
    const beaten = registry.register('beaten', { syncPeriodMs: 1_000 });
    beaten.beat();
    t.advance(900);
    registry.restartClocks();
    t.advance(900);
    expect(registry.livenessChecks()).toEqual([
      { name: 'waiting', ok: true },
      { name: 'beaten', ok: false, reason: 'last heartbeat 1.8s ago, window 1.0s' },
    ]);
  });

  it('derives each window from the sync period plus a per-component grace', () => {
    const t = clock();
    const registry = new HealthRegistry({ now: t.now, defaultGraceMs: 1_000 });
    const fast = registry.register('fast', { syncPeriodMs: 1_000 });
    const slow = registry.register('slow', { syncPeriodMs: 1_000, graceMs: 60_000 });
    fast.beat();
    slow.beat();
    t.advance(5_000);
    const byName = Object.fromEntries(registry.livenessChecks().map((c) => [c.name, c.ok]));
    expect(byName).toEqual({ fast: false, slow: true });
    expect(registry.status('slow')?.windowMs).toBe(61_000);
  });

  it('lets the operator override a window by name', () => {
    const registry = new HealthRegistry({ windowOverridesMs: { proxy: 123_000 } });
    registry.register('proxy', { syncPeriodMs: 1_000, graceMs: 1 });
    expect(registry.status('proxy')?.windowMs).toBe(123_000);
  });

  it('stays live as long as beats keep coming, whatever the sync outcomes', () => {
    const t = clock();
    const registry = new HealthRegistry({ now: t.now, defaultGraceMs: 0 });
    const component = registry.register('routes', { syncPeriodMs: 1_000 });
    for (let i = 0; i < 10; i++) {
      t.advance(900);
      component.beat();
      expect(registry.livenessChecks()[0]?.ok).toBe(true);
    }
    expect(registry.status('routes')?.beats).toBe(10);
    t.advance(1_001);
    expect(registry.livenessChecks()[0]?.reason).toMatch(/^last heartbeat 1\.0s ago, window 1\.0s$/);
  });

  it('rejects duplicate and malformed names and non-positive periods', () => {
    const registry = new HealthRegistry();
    registry.register('a', { syncPeriodMs: 1 });
    expect(() => registry.register('a', { syncPeriodMs: 1 })).toThrow(/already registered/);
    expect(() => registry.register('Bad Name', { syncPeriodMs: 1 })).toThrow(/invalid health component name/);
    expect(() => registry.register('b', { syncPeriodMs: 0 })).toThrow(/must be positive/);
  });

  it('is ready only when every readiness check passes and every component ended a first sync', () => {
    const registry = new HealthRegistry();
    let informersSynced = false;
    registry.addReadinessCheck('informers', () => (informersSynced ? undefined : 'pods not synced'));
    const component = registry.register('lballoc', { syncPeriodMs: 1_000 });
    expect(registry.readinessChecks()).toEqual([
      { name: 'informers', ok: false, reason: 'pods not synced' },
      { name: 'lballoc', ok: false, reason: 'first sync has not ended yet' },
    ]);
    informersSynced = true;
    component.syncEnded();
    expect(registry.readinessChecks().every((c) => c.ok)).toBe(true);
  });

  it('turns a readiness check that throws into a failed check', () => {
    const registry = new HealthRegistry();
    registry.addReadinessCheck('broken', () => {
      throw new Error('boom');
    });
    expect(registry.readinessChecks()).toEqual([{ name: 'broken', ok: false, reason: 'check threw: boom' }]);
  });
});
