import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MAX_TIMER_DELAY_MS, setLongTimeout } from './long-timer.js';

const DAY_MS = 24 * 3_600_000;

describe('setLongTimeout', () => {
  beforeEach(() => void vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] }));
  afterEach(() => void vi.useRealTimers());

  it('waits out a delay longer than Node timers take (720h), in chunks', () => {
    const fired = vi.fn();
    setLongTimeout(fired, 30 * DAY_MS);
    vi.advanceTimersByTime(MAX_TIMER_DELAY_MS + 1);
    expect(fired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(30 * DAY_MS - MAX_TIMER_DELAY_MS - 2);
    expect(fired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(fired).toHaveBeenCalledOnce();
  });

  it('fires short delays like setTimeout, and can be cleared in any chunk', () => {
    const short = vi.fn();
    setLongTimeout(short, 50);
    vi.advanceTimersByTime(50);
    expect(short).toHaveBeenCalledOnce();
    const cleared = vi.fn();
    const timer = setLongTimeout(cleared, 40 * DAY_MS);
    vi.advanceTimersByTime(MAX_TIMER_DELAY_MS + 10);
    timer.clear();
    vi.advanceTimersByTime(40 * DAY_MS);
    expect(cleared).not.toHaveBeenCalled();
  });

  it('never fires an infinite delay; fires a negative one at once', () => {
    const never = vi.fn();
    const now = vi.fn();
    setLongTimeout(never, Number.POSITIVE_INFINITY);
    setLongTimeout(now, -5);
    vi.advanceTimersByTime(0);
    expect(now).toHaveBeenCalledOnce();
    vi.advanceTimersByTime(400 * DAY_MS);
    expect(never).not.toHaveBeenCalled();
  });
});

describe('the bare setTimeout this replaces', () => {
  it('fires a 720h timer after about a millisecond (why the helper exists)', async () => {
    const started = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 720 * 3_600_000));
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});
