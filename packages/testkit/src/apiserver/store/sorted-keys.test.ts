import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SortedKeys } from './sorted-keys.js';

const byCodeUnit = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

// Keys from a small alphabet that holds '-', '/' and '0', the characters around namespace/name boundaries.
const key = fc.string({ unit: fc.constantFrom('a', 'b', '-', '/', '0', 'z'), minLength: 0, maxLength: 4 });
const operation = fc.oneof(
  fc.record({ op: fc.constant('add' as const), key }),
  fc.record({ op: fc.constant('delete' as const), key }),
);

describe('SortedKeys', () => {
  it('holds the same keys in the same order as a sorted set, through adds and deletes that split and empty chunks', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.array(operation, { maxLength: 300 }), key, fc.boolean(), (maxChunk, operations, probe, exclusive) => {
        const keys = new SortedKeys(maxChunk);
        const model = new Set<string>();
        for (const { op, key: k } of operations) {
          if (op === 'add') {
            expect(keys.add(k)).toBe(!model.has(k));
            model.add(k);
          } else {
            expect(keys.delete(k)).toBe(model.has(k));
            model.delete(k);
          }
        }
        const sorted = [...model].sort(byCodeUnit);
        expect(keys.size).toBe(sorted.length);
        expect([...keys.from()]).toEqual(sorted);
        expect([...keys.from(probe, exclusive)]).toEqual(sorted.filter((k) => (exclusive ? k > probe : k >= probe)));
        expect(keys.countBefore(probe, exclusive)).toBe(sorted.filter((k) => (exclusive ? k <= probe : k < probe)).length);
      }),
      { numRuns: 300 },
    );
  });

  it('starts a walk at a namespace of a large set and counts the keys before it', () => {
    const keys = new SortedKeys();
    for (let i = 0; i < 100_000; i++) keys.add(`ns-${i % 1000}/pod-${String(i).padStart(6, '0')}`);
    const walk = keys.from('ns-500/', false);
    const first = Array.from({ length: 3 }, () => walk.next().value);
    expect(first).toEqual(['ns-500/pod-000500', 'ns-500/pod-001500', 'ns-500/pod-002500']);
    expect(keys.countBefore('ns-500/')).toBe([...keys.from()].filter((k) => k < 'ns-500/').length);
  });
});
