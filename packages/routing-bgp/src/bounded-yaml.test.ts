import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { yamlBoundsProblem } from './bounded-yaml.js';
import { planExternalPeers } from './external-peers.js';

const self = { primary: '10.0.0.1', byFamily: { ipv4: '10.0.0.1' } };
const peersAnnotation = (text: string) =>
  planExternalPeers({ configured: [], node: { metadata: { name: 'node-1', annotations: { 'kube-router.io/peers': text } } }, self });

describe('yamlBoundsProblem', () => {
  it('measures nesting on the CST: flow and block collections, not brackets inside quoted scalars', () => {
    const bounds = { maxBytes: 1024, maxDepth: 2 };
    expect(yamlBoundsProblem('- remoteip: 192.0.2.1\n  remoteasn: 65000\n', bounds)).toBeUndefined();
    expect(yamlBoundsProblem('[{remoteip: 192.0.2.1, remoteasn: 65000}]', bounds)).toBeUndefined();
    expect(yamlBoundsProblem(`- password: "${'['.repeat(100)}"`, bounds)).toBeUndefined();
    expect(yamlBoundsProblem('[[[x]]]', bounds)).toMatch(/deeper than the 2 levels/);
    expect(yamlBoundsProblem('- - - x', bounds)).toMatch(/deeper than the 2 levels/);
    expect(yamlBoundsProblem('a:\n  b:\n    c: d', bounds)).toMatch(/deeper than the 2 levels/);
    expect(yamlBoundsProblem('x'.repeat(1025), bounds)).toMatch(/is 1025 bytes long, more than the 1024 allowed/);
  });
});

describe('kube-router.io/peers with hostile nesting', () => {
  // On the main of 2026-12-03 the second of these reads ended the process (FATAL ERROR: RegExpCompiler Allocation
  // failed, exit 134): no assertion would run, the worker dies. Every sync reads the annotation again.
  it.each([
    ['900 nested brackets', '['.repeat(900) + ']'.repeat(900)],
    ['900 nested flow mappings', '{a: '.repeat(900) + '1' + '}'.repeat(900)],
    ['900 nested block sequences', '- '.repeat(900) + 'x'],
    ['30,000 unclosed brackets', '['.repeat(30_000)],
  ])('%s: a problem of the annotation, read after read, and the process lives', (_, text) => {
    for (let read = 0; read < 5; read++) {
      const plan = peersAnnotation(text);
      expect(plan.peers).toEqual([]);
      expect(plan.incomplete).toBe(true);
      expect(plan.problems.map(String)).toEqual([expect.stringMatching(/^Error: kube-router\.io\/peers (nests collections deeper|is \d+ bytes long)/)]);
    }
  });

  it('any nesting of flow and block collections, at any depth, is read or refused, never thrown', () => {
    const opener = fc.constantFrom('[', '{a: ', '- ', '[{b: ');
    fc.assert(
      fc.property(fc.array(opener, { minLength: 1, maxLength: 3000 }), fc.boolean(), (openers, close) => {
        const closers = openers.map((o) => (o.startsWith('[{') ? '}]' : o.startsWith('[') ? ']' : o.startsWith('{') ? '}' : '')).reverse();
        const text = openers.join('') + 'x' + (close ? closers.join('') : '');
        const plan = peersAnnotation(text);
        expect(plan.peers).toEqual([]);
        expect(plan.problems.length).toBeGreaterThan(0);
      }),
      { numRuns: 60 },
    );
  });

  it('a list of 500 peers is still read', () => {
    const text = Array.from({ length: 500 }, (_, i) => `- remoteip: 192.0.${i >> 8}.${i & 255}\n  remoteasn: 65000\n`).join('');
    const plan = peersAnnotation(text);
    expect(plan.problems).toEqual([]);
    expect(plan.peers).toHaveLength(500);
  });
});
