import { describe, expect, it } from 'vitest';
import { Reachability } from './reachability.js';

describe('Reachability', () => {
  it('starts all allowed, without self-connections', () => {
    const r = new Reachability();
    const cells = r.connections();
    expect(cells).toHaveLength(9 * 8 * 2 * 2);
    expect(cells.every((cell) => cell.from !== cell.to && r.isAllowed(cell))).toBe(true);
  });

  it('applies statements in order, later ones overriding earlier ones', () => {
    const r = new Reachability().expectAllIngress('x/a', false).expectPeer('y/*', 'x/a', true, { port: 80, protocol: 'TCP' });
    expect(r.isAllowed({ from: 'y/b', to: 'x/a', port: 80, protocol: 'TCP' })).toBe(true);
    expect(r.isAllowed({ from: 'y/b', to: 'x/a', port: 81, protocol: 'TCP' })).toBe(false);
    expect(r.isAllowed({ from: 'y/b', to: 'x/a', port: 80, protocol: 'UDP' })).toBe(false);
    expect(r.isAllowed({ from: 'z/b', to: 'x/a', port: 80, protocol: 'TCP' })).toBe(false);
    expect(r.isAllowed({ from: 'x/a', to: 'z/b', port: 80, protocol: 'TCP' })).toBe(true);
  });

  it('resolves pod sets: one pod, a namespace, a pod name across namespaces, everything, lists', () => {
    const r = new Reachability();
    expect(r.resolve('x/a')).toEqual(['x/a']);
    expect(r.resolve('y/*')).toEqual(['y/a', 'y/b', 'y/c']);
    expect(r.resolve('*/b')).toEqual(['x/b', 'y/b', 'z/b']);
    expect(r.resolve('*')).toHaveLength(9);
    expect(r.resolve(['x/a', 'x/*'])).toEqual(['x/a', 'x/b', 'x/c']);
  });

  it('refuses a pod set that names nothing and a port the world does not serve', () => {
    const r = new Reachability();
    expect(() => r.expectPeer('q/a', 'x/a', false)).toThrow(/names no pod/);
    expect(() => r.expectAllIngress('x/a', false, { port: 8080 })).toThrow(/port 8080/);
  });

  it('expectAllEgress blocks a source towards every other pod only', () => {
    const r = new Reachability().expectAllEgress('x/*', false);
    const blocked = r.connections().filter((cell) => !r.isAllowed(cell));
    expect(blocked).toHaveLength(3 * 8 * 4);
    expect(blocked.every((cell) => cell.from.startsWith('x/'))).toBe(true);
  });
});
