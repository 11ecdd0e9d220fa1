// Issue 35: a `$setElementOrder` of 40,000 entries held the server for about 30 s (each item scanned the order).
import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube-object.js';
import { applyPatch } from './apply-patch.js';

const pod = (containers: number): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'p' },
  spec: { containers: Array.from({ length: containers }, (_, i) => ({ name: `c${i}`, image: 'app:1' })) },
});

const names = (obj: KubeObject) => (obj.spec as { containers: { name: string }[] }).containers.map((c) => c.name);

function timed(run: () => void): number {
  const start = performance.now();
  run();
  return performance.now() - start;
}

// What kubectl sends: the order of every item it knows, and the items it changed.
const orderPatch = (entries: number) => ({
  spec: {
    '$setElementOrder/containers': Array.from({ length: entries }, (_, i) => ({ name: `c${entries - 1 - i}` })),
    containers: [{ name: 'c0', image: 'app:2' }],
  },
});
const listPatch = (entries: number) => ({ spec: { containers: Array.from({ length: entries }, (_, i) => ({ name: `n${i}`, image: 'app:1' })) } });

describe('strategic merge patches of large lists', () => {
  it('order as $setElementOrder says, and keep unnamed items after the named ones', () => {
    const result = applyPatch(pod(4), 'strategic', { spec: { '$setElementOrder/containers': [{ name: 'c2' }, { name: 'zz' }, { name: 'c0' }] } });
    expect(names(result)).toEqual(['c2', 'c0', 'c1', 'c3']);
  });

  it.each([
    ['a $setElementOrder', orderPatch, 2],
    ['a list merged by key', listPatch, 0],
  ])('apply %s of 40,000 entries in about ten times the time of 4,000 entries', (_what, patchOf, containers) => {
    // Warm up first, so that the small run does not pay for compilation and the ratio compares like with like.
    applyPatch(pod(containers), 'strategic', patchOf(400));
    const small = timed(() => applyPatch(pod(containers), 'strategic', patchOf(4_000)));
    const large = timed(() => applyPatch(pod(containers), 'strategic', patchOf(40_000)));
    // Linear is 10x; quadratic is 100x. Either bound is generous for a loaded 2-core machine.
    expect(large).toBeLessThan(Math.max(30 * small, 3_000));
  }, 120_000);
});
