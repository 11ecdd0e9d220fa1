import { describe, expect, it } from 'vitest';
import { Mutex, nftTableLock, toolLocks } from './mutex.js';

const tick = () => new Promise((resolve) => setTimeout(resolve, 5));

describe('Mutex', () => {
  it('runs tasks one at a time in the order they asked', async () => {
    const mutex = new Mutex();
    const events: string[] = [];
    let running = 0;
    const task = (name: string) => async () => {
      running++;
      expect(running).toBe(1);
      events.push(`start ${name}`);
      await tick();
      events.push(`end ${name}`);
      running--;
      return name;
    };
    const results = await Promise.all([
      mutex.runExclusive(task('a')),
      mutex.runExclusive(task('b')),
      mutex.runExclusive(task('c')),
    ]);
    expect(results).toEqual(['a', 'b', 'c']);
    expect(events).toEqual(['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
    expect(mutex.locked).toBe(false);
  });

  it('keeps going after a task fails, and hands the failure to its caller', async () => {
    const mutex = new Mutex();
    const failed = mutex.runExclusive(async () => {
      await tick();
      throw new Error('boom');
    });
    const next = mutex.runExclusive(() => 'next');
    expect(mutex.locked).toBe(true);
    await expect(failed).rejects.toThrow('boom');
    await expect(next).resolves.toBe('next');
  });

  it('has one lock per tool family', () => {
    expect(Object.keys(toolLocks).sort()).toEqual(['iproute2', 'ipset', 'nft', 'xtables']);
    expect(new Set(Object.values(toolLocks)).size).toBe(4);
  });

  it('has one lock per nftables table for the whole process, apart from the nft tool lock', () => {
    const ipv4 = nftTableLock('ip kube-router-filter-ipv4');
    expect(nftTableLock('ip kube-router-filter-ipv4')).toBe(ipv4);
    expect(nftTableLock('ip6 kube-router-filter-ipv6')).not.toBe(ipv4);
    expect(ipv4).not.toBe(toolLocks.nft);
  });
});
