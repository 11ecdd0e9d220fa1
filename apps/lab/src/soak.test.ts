// Issue 35's soak, the 2-minute version `npm test` runs (the long one: `npm run soak`, see docs/reliability.md).
import { randomInt } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasTool } from '@kube-router/testkit';
import { growth, heapGrowth, Soak, type MemorySample } from './testing/soak.js';

const isRoot = process.getuid?.() === 0;

describe('growth', () => {
  it('compares the floors of the first and last thirds, so a sawtooth is no trend and a rising floor is', () => {
    expect(growth([10, 50, 10, 40, 10, 30])).toBe(0);
    expect(growth([10, 20, 30, 40, 50, 60])).toBe(40);
    expect(growth([30, 10, 20, 40, 60, 50])).toBe(40);
    expect(growth([10, 10])).toBe(0);
  });

  it('tells the heap’s growth only when each third saw a major collection, the only time the heap drops to what it keeps', () => {
    const samples = (heaps: number[], majorGcs: number[]): MemorySample[] =>
      heaps.map((heapBytes, index) => ({ at: index, heapBytes, rssBytes: 0, fds: 0, startTime: 1, majorGcs: majorGcs[index]! }));
    const climbing = [50, 60, 70, 80, 90, 100];
    expect(heapGrowth(samples(climbing, [0, 1, 1, 1, 1, 2]))).toBe(40);
    // No major collection in the last third: its floor is only where the heap has climbed to so far.
    expect(heapGrowth(samples(climbing, [0, 1, 1, 1, 1, 1]))).toBeUndefined();
    expect(heapGrowth(samples([50, 60, 70], [0, 1, 2]))).toBeUndefined();
  });
});

describe.skipIf(!isRoot || !hasTool('kubectl'))('a 2-minute soak: churn on a two-node lab with traffic probed (needs root and kubectl)', () => {
  // Subnets of its own: `npm start` takes 10.250.0.0/24, the DaemonSets test 1-19, the image test 20-99, lab.test
  // 100-249, the faults test 250-254.
  const subnet = 255;
  const soak = new Soak({
    runId: `tsk${randomInt(36 * 36).toString(36).padStart(2, '0')}`,
    subnet,
    durationMs: 120_000,
    warmupMs: 30_000,
    log: (line) => console.log(line),
  });

  beforeAll(() => soak.start(), 330_000);
  afterAll(() => soak.stop(), 90_000);

  it('keeps every verdict as the policies say, returns the kernels to the same state each round, and stays flat', async () => {
    const report = await soak.run();
    console.log(report.summary);
    expect(report.problems).toEqual([]);
    expect(report.wrong, 'probes whose verdict was not what the policies said').toEqual([]);
    expect(report.probeErrors).toEqual([]);
    expect(report.rounds).toBeGreaterThanOrEqual(3);
  }, 420_000);

  it('stops cleanly', async () => {
    expect(await soak.stop(), soak.lab.stderr.slice(-20).join('\n')).toBe(0);
  }, 90_000);
});
