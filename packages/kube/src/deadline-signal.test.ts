import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { deadlineSignal } from './deadline-signal.js';

describe('deadlineSignal', () => {
  it('aborts at its deadline and says so', async () => {
    const deadline = deadlineSignal(20);
    await new Promise((resolve) => deadline.signal.addEventListener('abort', resolve, { once: true }));
    expect(deadline.timedOut()).toBe(true);
    expect((deadline.signal.reason as DOMException).name).toBe('TimeoutError');
  });

  it("aborts with the caller's reason when the caller stops first, and that is no timeout", () => {
    const stopping = new AbortController();
    const deadline = deadlineSignal(60_000, stopping.signal);
    stopping.abort(new Error('stopping'));
    expect(deadline.signal.aborted).toBe(true);
    expect(deadline.signal.reason).toEqual(new Error('stopping'));
    expect(deadline.timedOut()).toBe(false);
    deadline.dispose();
  });

  it('is aborted from the start under a caller that already stopped', () => {
    const stopping = new AbortController();
    stopping.abort();
    expect(deadlineSignal(60_000, stopping.signal).signal.aborted).toBe(true);
  });

  it("leaves nothing on a long-lived caller's signal once each request is disposed (the leader elector's case)", () => {
    const stopping = new AbortController();
    for (let request = 0; request < 1_000; request++) deadlineSignal(60_000, stopping.signal).dispose();
    expect(getEventListeners(stopping.signal, 'abort')).toHaveLength(0);
  });
});
