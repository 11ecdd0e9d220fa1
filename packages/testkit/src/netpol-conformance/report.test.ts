import { describe, expect, it } from 'vitest';
import type { Observation } from './matrix.js';
import { mismatchesOf } from './matrix.js';
import type { IpFamily } from './model.js';
import { Reachability } from './reachability.js';
import { renderReachabilityReport } from './report.js';

/** What a dataplane that blocks `blocked` would show for `expected`. */
function observe(expected: Reachability, actual: Reachability, family: IpFamily = 4): Observation[] {
  return expected.connections().map((cell) => {
    const observed = actual.isAllowed(cell);
    return { ...cell, family, expected: expected.isAllowed(cell), observed, detail: observed ? `answered by ${cell.to} in 2 ms` : 'timeout in 501 ms' };
  });
}

describe('renderReachabilityReport', () => {
  const expected = new Reachability().expectAllIngress('x/a', false);
  // The dataplane under test forgot pod y/b: it still reaches x/a on 80/TCP.
  const actual = new Reachability().expectAllIngress('x/a', false).expectPeer('y/b', 'x/a', true, { port: 80, protocol: 'TCP' });
  const observations = observe(expected, actual);
  const report = renderReachabilityReport(observations, 'case: reachability differs');

  it('finds exactly the differing cell', () => {
    expect(mismatchesOf(observations).map((o) => `${o.from}>${o.to} ${o.port}/${o.protocol}`)).toEqual(['y/b>x/a 80/TCP']);
  });

  it('prints the expected, observed and differing tables side by side for the group that differs', () => {
    const lines = report.split('\n');
    expect(lines[0]).toBe('case: reachability differs');
    const start = lines.indexOf('IPv4 80/TCP: 1 of 72 probes differ');
    expect(start).toBeGreaterThan(0);
    const table = lines.slice(start + 1, start + 12);
    expect(table[0]).toMatch(/^expected\s+\|\s+observed\s+\|\s+differs \(X\)$/);
    expect(table[1]).toBe(
      'from\\to x/a x/b x/c y/a y/b y/c z/a z/b z/c   |   from\\to x/a x/b x/c y/a y/b y/c z/a z/b z/c   |   from\\to x/a x/b x/c y/a y/b y/c z/a z/b z/c',
    );
    expect(table[2]).toBe(
      'x/a      -   .   .   .   .   .   .   .   .    |   x/a      -   .   .   .   .   .   .   .   .    |   x/a      -   .   .   .   .   .   .   .   .',
    );
    expect(table[6]).toBe(
      'y/b      X   .   .   .   -   .   .   .   .    |   y/b      .   .   .   .   -   .   .   .   .    |   y/b      X   .   .   .   -   .   .   .   .',
    );
    expect(table[7]).toBe(
      'y/c      X   .   .   .   .   -   .   .   .    |   y/c      X   .   .   .   .   -   .   .   .    |   y/c      .   .   .   .   .   -   .   .   .',
    );
  });

  it('says which groups matched and lists each differing probe with what it saw', () => {
    expect(report).toContain('IPv4 81/TCP: as expected (72 probes)');
    expect(report).toContain('IPv4 80/UDP: as expected (72 probes)');
    expect(report).toContain('differing probes:\n  IPv4 y/b -> x/a 80/TCP: expected blocked, observed allowed (answered by x/a in 2 ms)');
  });

  it('cuts a long list of differing probes short', () => {
    const everythingOpen = observe(new Reachability().expectAll(false), new Reachability());
    const long = renderReachabilityReport(everythingOpen);
    expect(long.match(/^ {2}IPv4 /gm)).toHaveLength(40);
    expect(long).toContain(`... and ${everythingOpen.length - 40} more`);
  });
});
