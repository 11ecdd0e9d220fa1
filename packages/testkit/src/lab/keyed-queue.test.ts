import { describe, expect, it } from 'vitest';
import { KeyedQueue } from './keyed-queue.js';

describe('KeyedQueue', () => {
  it('never runs one key twice at once and coalesces requests that arrive meanwhile into one more run', async () => {
    const log: string[] = [];
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const queue = new KeyedQueue(async (key) => {
      log.push(`start ${key}`);
      if (key === 'a' && log.filter((line) => line === 'start a').length === 1) await gate;
      log.push(`end ${key}`);
    });
    queue.enqueue('a');
    queue.enqueue('a');
    queue.enqueue('a');
    queue.enqueue('b');
    await new Promise((resolve) => setImmediate(resolve));
    expect(log).toEqual(['start a', 'start b', 'end b']);
    release();
    await queue.drain();
    expect(log).toEqual(['start a', 'start b', 'end b', 'end a', 'start a', 'end a']);
  });
});
