import { describe, expect, it } from 'vitest';
import { Backoff } from './backoff.js';

describe('Backoff', () => {
  it('doubles from the initial delay up to the cap, and starts over after reset', () => {
    const backoff = new Backoff({ initialMs: 1000, maxMs: 30_000, jitter: 0 });
    expect(Array.from({ length: 7 }, () => backoff.next())).toEqual([1000, 2000, 4000, 8000, 16_000, 30_000, 30_000]);
    backoff.reset();
    expect(backoff.next()).toBe(1000);
  });

  it('spreads delays by the jitter without passing the cap', () => {
    const backoff = new Backoff({ initialMs: 1000, maxMs: 3000, jitter: 0.5, random: () => 1 });
    expect([backoff.next(), backoff.next(), backoff.next()]).toEqual([1500, 3000, 3000]);
  });

  it('refuses nonsense', () => {
    expect(() => new Backoff({ initialMs: 0 })).toThrow(/invalid backoff/);
    expect(() => new Backoff({ initialMs: 10, maxMs: 5 })).toThrow(/invalid backoff/);
  });
});
