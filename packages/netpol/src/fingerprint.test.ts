import { describe, expect, it } from 'vitest';
import { defineFingerprint, fingerprintOf } from './fingerprint.js';

describe('fingerprintOf', () => {
  const long = (last: string) => [...Array.from({ length: 20 }, (_, i) => `10.0.0.${i}`), last];

  it('is equal for equal content, whether lists are shared or copies', () => {
    const shared = long('10.0.1.1');
    expect(fingerprintOf({ a: shared, b: shared })).toBe(fingerprintOf({ a: long('10.0.1.1'), b: [...shared] }));
  });

  it('differs when any element of a long list differs', () => {
    expect(fingerprintOf({ a: long('10.0.1.1') })).not.toBe(fingerprintOf({ a: long('10.0.1.2') }));
  });

  it('differs for short lists and scalars too', () => {
    expect(fingerprintOf({ a: ['x'], n: 1 })).not.toBe(fingerprintOf({ a: ['y'], n: 1 }));
    expect(fingerprintOf({ a: ['x'], n: 1 })).not.toBe(fingerprintOf({ a: ['x'], n: 2 }));
  });
});

describe('defineFingerprint', () => {
  it('hashes the content when first read, once, and as fingerprintOf does', () => {
    let reads = 0;
    const content = { a: ['x'], n: 1 };
    const target = defineFingerprint({ id: 'p' }, () => {
      reads++;
      return content;
    });
    expect(reads).toBe(0);
    expect(target.fingerprint).toBe(fingerprintOf(content));
    expect(target.fingerprint).toBe(fingerprintOf(content));
    expect(reads).toBe(1);
    // It is an ordinary field to whoever copies or lists the object.
    expect({ ...target }).toEqual({ id: 'p', fingerprint: fingerprintOf(content) });
  });
});
