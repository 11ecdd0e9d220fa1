import { describe, expect, it } from 'vitest';
import { lballocOptions } from './plugin.js';

describe('lballocOptions', () => {
  it('fills in the defaults', () => {
    expect(lballocOptions.parse({ ranges: ['10.0.0.0/24'] })).toEqual({
      ranges: ['10.0.0.0/24'],
      defaultClass: true,
      syncPeriodMs: 60_000,
    });
  });

  it('refuses an unknown key instead of dropping it', () => {
    const result = lballocOptions.safeParse({ range: ['10.0.0.0/24'] });
    expect(result.success).toBe(false);
    expect(result.error?.issues).toEqual([expect.objectContaining({ code: 'unrecognized_keys', keys: ['range'] })]);
  });
});
