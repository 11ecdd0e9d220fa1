import { describe, expect, it } from 'vitest';
import { findExecutable } from './executables.js';

describe('findExecutable', () => {
  it('finds a name on PATH, and looks a path up as it is (a plugin option may name one)', () => {
    expect(findExecutable('sh', '/bin:/usr/bin')).toMatch(/\/sh$/);
    expect(findExecutable('/bin/sh')).toBe('/bin/sh');
    expect(findExecutable('/nonexistent/gobgpd')).toBeUndefined();
    expect(findExecutable('kube-router-test-no-such-tool')).toBeUndefined();
  });
});
