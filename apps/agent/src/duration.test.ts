import { describe, expect, it } from 'vitest';
import { formatGoDuration, parseGoDuration } from './duration.js';

describe('parseGoDuration', () => {
  it.each([
    ['30s', 30_000],
    ['5m', 300_000],
    ['1h30m', 5_400_000],
    ['2h22m', 8_520_000],
    ['250ms', 250],
    ['1.5h', 5_400_000],
    ['.5s', 500],
    ['1m0s', 60_000],
    ['0', 0],
    ['-1s', -1000],
    ['+2s', 2000],
    ['1500us', 1.5],
    ['1500µs', 1.5],
    ['2000000ns', 2],
  ])('%s is %d ms', (text, ms) => {
    expect(parseGoDuration(text)).toBeCloseTo(ms, 9);
  });

  it.each(['', '5', '5 m', '1d', 'm', '5M', '1h-30m', 'abc', '.s', '30s30sx'])(
    'rejects %j as Go does',
    (text) => {
      expect(() => parseGoDuration(text)).toThrow(/invalid duration/);
    },
  );

  it('says why in the message', () => {
    expect(() => parseGoDuration('1d')).toThrow('invalid duration "1d": unknown unit "d"');
    expect(() => parseGoDuration('5')).toThrow('invalid duration "5": missing unit');
  });
});

describe('formatGoDuration', () => {
  it.each([
    [300_000, '5m0s'],
    [60_000, '1m0s'],
    [5_400_000, '1h30m0s'],
    [250, '250ms'],
    [1_500, '1.5s'],
    [0, '0s'],
    [30_000, '30s'],
  ])('%d ms is %s', (ms, text) => {
    expect(formatGoDuration(ms)).toBe(text);
    expect(parseGoDuration(text)).toBe(ms);
  });
});
