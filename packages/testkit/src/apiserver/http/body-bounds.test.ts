// The nesting bound checked before a body reaches a recursive parser: exact on JSON and YAML of any shape.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { jsonNestsDeeperThan, yamlNestsDeeperThan } from './body-bounds.js';

function depthOf(value: unknown): number {
  if (Array.isArray(value)) return 1 + Math.max(0, ...value.map(depthOf));
  if (typeof value === 'object' && value !== null) return 1 + Math.max(0, ...Object.values(value).map(depthOf));
  return 0;
}

// JSON values, some of them wrapped in a chain of arrays and objects deeper than jsonValue builds.
const values = fc
  .tuple(fc.jsonValue({ maxDepth: 6 }), fc.array(fc.constantFrom('array', 'object'), { maxLength: 30 }))
  .map(([value, wrappers]) => wrappers.reduce<unknown>((inner, wrapper) => (wrapper === 'array' ? [inner] : { k: inner }), value));

const renderings: [string, (value: unknown) => string, (text: string, max: number) => boolean][] = [
  ['JSON', (value) => JSON.stringify(value), jsonNestsDeeperThan],
  ['block YAML', (value) => stringify(value), yamlNestsDeeperThan],
  ['flow YAML', (value) => stringify(value, { collectionStyle: 'flow' }), yamlNestsDeeperThan],
];

describe('nesting depth of a request body', () => {
  it.each(renderings)('is measured exactly on %s', (_what, render, nestsDeeperThan) => {
    fc.assert(
      fc.property(values, (value) => {
        const text = render(value);
        const depth = depthOf(value);
        expect(nestsDeeperThan(text, depth)).toBe(false);
        if (depth > 0) expect(nestsDeeperThan(text, depth - 1)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('does not count brackets in strings', () => {
    expect(jsonNestsDeeperThan(JSON.stringify({ a: '[[[[{{{{', b: ['"]]]]\\'] }), 2)).toBe(false);
    expect(yamlNestsDeeperThan('a: "[[[[{{{{"\nb: \'[[[[\'\nc: |\n  [[[[\n', 1)).toBe(false);
  });

  it('stops at the first level too many, in time linear in the bound, not the body', () => {
    const deep = '['.repeat(2_000_000);
    const start = performance.now();
    expect(jsonNestsDeeperThan(deep, 200)).toBe(true);
    expect(yamlNestsDeeperThan(deep, 200)).toBe(true);
    expect(performance.now() - start).toBeLessThan(1_000);
  });
});
