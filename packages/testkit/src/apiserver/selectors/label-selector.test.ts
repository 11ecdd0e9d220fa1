import { describe, expect, it } from 'vitest';
import { ApiError } from '../errors.js';
import { matchesLabelSelector, parseLabelSelector } from './label-selector.js';

const labels = { app: 'web', tier: 'front', version: '3' };

function matches(selector: string, target: Record<string, string> = labels): boolean {
  return matchesLabelSelector(target, parseLabelSelector(selector));
}

describe('label selectors', () => {
  it('parses every operator', () => {
    expect(parseLabelSelector('a=b,c==d,e!=f,g in (h, i),j notin (k),l,!m,n>1,o<2')).toEqual([
      { key: 'a', operator: 'equals', values: ['b'] },
      { key: 'c', operator: 'equals', values: ['d'] },
      { key: 'e', operator: 'notEquals', values: ['f'] },
      { key: 'g', operator: 'in', values: ['h', 'i'] },
      { key: 'j', operator: 'notIn', values: ['k'] },
      { key: 'l', operator: 'exists', values: [] },
      { key: 'm', operator: 'doesNotExist', values: [] },
      { key: 'n', operator: 'gt', values: ['1'] },
      { key: 'o', operator: 'lt', values: ['2'] },
    ]);
  });

  it('matches equality and inequality; != also matches objects without the label', () => {
    expect(matches('app=web')).toBe(true);
    expect(matches('app==web,tier=front')).toBe(true);
    expect(matches('app=db')).toBe(false);
    expect(matches('app!=db')).toBe(true);
    expect(matches('app!=web')).toBe(false);
    expect(matches('missing!=x')).toBe(true);
  });

  it('matches sets and existence', () => {
    expect(matches('tier in (front,back)')).toBe(true);
    expect(matches('tier in (back)')).toBe(false);
    expect(matches('tier notin (back)')).toBe(true);
    expect(matches('tier notin (front)')).toBe(false);
    expect(matches('missing notin (x)')).toBe(true);
    expect(matches('missing in (x)')).toBe(false);
    expect(matches('app')).toBe(true);
    expect(matches('missing')).toBe(false);
    expect(matches('!missing')).toBe(true);
    expect(matches('!app')).toBe(false);
  });

  it('compares integers with > and <', () => {
    expect(matches('version>2')).toBe(true);
    expect(matches('version<3')).toBe(false);
    expect(matches('app>1')).toBe(false);
  });

  it('treats an empty selector as everything and empty values literally', () => {
    expect(matches('')).toBe(true);
    expect(matches('app=')).toBe(false);
    expect(matches('app=', { app: '' })).toBe(true);
  });

  it('rejects malformed selectors with a 400', () => {
    for (const bad of ['a in b', 'a in ()', '=b', 'a b', 'a>x', 'tier in (front']) {
      expect(() => parseLabelSelector(bad), bad).toThrow(ApiError);
    }
    try {
      parseLabelSelector('a in b');
    } catch (error) {
      expect((error as ApiError).code).toBe(400);
    }
  });
});
