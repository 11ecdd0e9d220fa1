import { describe, expect, it } from 'vitest';
import { JoinedSyncError, SyncFailures } from './sync-error.js';

describe('SyncFailures', () => {
  it('attempts every step, joins the failures with their objects and never stops early', async () => {
    const failures = new SyncFailures();
    const programmed: string[] = [];
    await failures.attemptEach(
      ['a', 'b', 'c', 'd'],
      (name) => `service/default/${name}`,
      async (name) => {
        if (name === 'b' || name === 'c') throw new Error(`${name} rejected`);
        programmed.push(name);
      },
    );
    expect(programmed).toEqual(['a', 'd']);
    expect(failures.size).toBe(2);
    let thrown: unknown;
    try {
      failures.throwIfAny('ipvs services');
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(JoinedSyncError);
    const joined = thrown as JoinedSyncError;
    expect(joined.message).toBe(
      'ipvs services: 2 failures: service/default/b: b rejected; service/default/c: c rejected',
    );
    expect(joined.failures.map((f) => f.object)).toEqual(['service/default/b', 'service/default/c']);
    expect(joined.errors).toHaveLength(2);
  });

  it('does not throw when nothing failed, and returns step results', async () => {
    const failures = new SyncFailures();
    expect(await failures.attempt('x', () => 42)).toBe(42);
    expect(() => failures.throwIfAny()).not.toThrow();
  });

  it('flattens nested joined errors so each failure keeps its own object', async () => {
    const inner = new SyncFailures();
    inner.add('route/10.0.0.0/24', new Error('exists'));
    inner.add('route/10.0.1.0/24', 'plain string');
    const outer = new SyncFailures();
    await outer.attempt('routes', () => inner.throwIfAny());
    await outer.attempt('peers', () => {
      throw new Error('peer down');
    });
    expect(outer.list.map((f) => f.object)).toEqual(['route/10.0.0.0/24', 'route/10.0.1.0/24', 'peers']);
    expect(() => outer.throwIfAny()).toThrow('3 failures: route/10.0.0.0/24: exists; route/10.0.1.0/24: plain string; peers: peer down');
  });
});
