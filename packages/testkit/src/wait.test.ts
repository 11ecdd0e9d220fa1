import { describe, expect, it } from 'vitest';
import { waitFor } from './wait.js';

describe('waitFor', () => {
  it('resolves with the time the condition took, checking again until it holds', async () => {
    let checks = 0;
    const elapsed = await waitFor('the third check', () => ++checks === 3, { intervalMs: 10 });
    expect(checks).toBe(3);
    expect(elapsed).toBeGreaterThanOrEqual(15);
  });

  it('fails after the timeout naming what it waited for and the last error a check threw', async () => {
    await expect(
      waitFor('the daemon', () => {
        throw new Error('connection refused');
      }, { timeoutMs: 60, intervalMs: 10 }),
    ).rejects.toThrow(/timed out after 60 ms waiting for the daemon \(last error: connection refused\)/);
    await expect(waitFor('never', () => false, 30)).rejects.toThrow(/^timed out after 30 ms waiting for never$/);
  });
});
