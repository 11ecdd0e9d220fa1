import { describe, expect, it } from 'vitest';
import { PolicyInputError } from './input-error.js';
import { compileLabelSelector } from './selector.js';

const labels = { app: 'web', tier: 'frontend', empty: '' };

describe('compileLabelSelector', () => {
  it.each([
    ['the empty selector', {}, true],
    ['matchLabels equal', { matchLabels: { app: 'web' } }, true],
    ['matchLabels different', { matchLabels: { app: 'db' } }, false],
    ['matchLabels on a missing key', { matchLabels: { zone: 'a' } }, false],
    ['matchLabels with an empty value', { matchLabels: { empty: '' } }, true],
    ['matchLabels all of them', { matchLabels: { app: 'web', tier: 'backend' } }, false],
    ['In, value listed', { matchExpressions: [{ key: 'app', operator: 'In', values: ['db', 'web'] }] }, true],
    ['In, value not listed', { matchExpressions: [{ key: 'app', operator: 'In', values: ['db'] }] }, false],
    ['In, key missing', { matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }] }, false],
    ['NotIn, value listed', { matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['web'] }] }, false],
    ['NotIn, value not listed', { matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['db'] }] }, true],
    ['NotIn, key missing', { matchExpressions: [{ key: 'zone', operator: 'NotIn', values: ['a'] }] }, true],
    ['Exists, present', { matchExpressions: [{ key: 'tier', operator: 'Exists' }] }, true],
    [
      'Exists, present with an empty value',
      { matchExpressions: [{ key: 'empty', operator: 'Exists', values: [] }] },
      true,
    ],
    ['Exists, missing', { matchExpressions: [{ key: 'zone', operator: 'Exists' }] }, false],
    ['DoesNotExist, missing', { matchExpressions: [{ key: 'zone', operator: 'DoesNotExist' }] }, true],
    ['DoesNotExist, present', { matchExpressions: [{ key: 'app', operator: 'DoesNotExist' }] }, false],
    [
      'matchLabels and expressions together',
      {
        matchLabels: { app: 'web' },
        matchExpressions: [
          { key: 'tier', operator: 'In', values: ['frontend'] },
          { key: 'zone', operator: 'DoesNotExist' },
        ],
      },
      true,
    ],
    ['a key that only exists on the prototype', { matchExpressions: [{ key: 'toString', operator: 'Exists' }] }, false],
  ])('%s', (_case, selector, expected) => {
    expect(compileLabelSelector(selector, 'sel').matches(labels)).toBe(expected);
  });

  it('gives equal keys to equal selectors written differently', () => {
    const a = compileLabelSelector(
      {
        matchLabels: { b: '2', a: '1' },
        matchExpressions: [
          { key: 'x', operator: 'In', values: ['q', 'p', 'p'] },
          { key: 'y', operator: 'Exists' },
        ],
      },
      'a',
    );
    const b = compileLabelSelector(
      {
        matchExpressions: [
          { key: 'y', operator: 'Exists' },
          { key: 'x', operator: 'In', values: ['p', 'q'] },
        ],
        matchLabels: { a: '1', b: '2' },
      },
      'b',
    );
    expect(a.key).toBe(b.key);
    expect(compileLabelSelector({ matchLabels: { a: '1' } }, 'c').key).not.toBe(a.key);
    expect(compileLabelSelector({}, 'd')).toMatchObject({ key: '{}', matchesAll: true });
  });

  it.each([
    ['not an object', 'app=web', 'sel', /expected a label selector/],
    ['matchLabels not a map', { matchLabels: ['app'] }, 'sel.matchLabels', /expected a map/],
    ['matchExpressions not a list', { matchExpressions: {} }, 'sel.matchExpressions', /expected a list/],
    [
      'a requirement without key',
      { matchExpressions: [{ operator: 'Exists' }] },
      'sel.matchExpressions[0].key',
      /non-empty string/,
    ],
    [
      'an unknown operator',
      { matchExpressions: [{ key: 'a', operator: 'Gt', values: ['1'] }] },
      'sel.matchExpressions[0].operator',
      /unsupported operator "Gt"/,
    ],
    [
      'values not strings',
      { matchExpressions: [{ key: 'a', operator: 'In', values: [1] }] },
      'sel.matchExpressions[0].values',
      /list of strings/,
    ],
    ['an unknown selector field', { matchFields: {} }, 'sel.matchFields', /unsupported field/],
  ])('rejects %s', (_case, selector, path, message) => {
    let thrown: unknown;
    try {
      compileLabelSelector(selector, 'sel');
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(PolicyInputError);
    expect((thrown as PolicyInputError).path).toBe(path);
    expect((thrown as PolicyInputError).message).toMatch(message);
  });
});
