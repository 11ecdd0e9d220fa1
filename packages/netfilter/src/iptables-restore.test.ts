import { describe, expect, it } from 'vitest';
import { blameRestoreFailure, renderIptablesRestore } from './iptables-restore.js';

describe('renderIptablesRestore', () => {
  it('declares only our chains, fills them, then adds extra lines and deletes chains', () => {
    const input = renderIptablesRestore([
      {
        table: 'filter',
        chains: [
          { name: 'KRT-FORWARD', rules: ['-d 10.0.0.5/32 -j KRT-POL-A'] },
          { name: 'KRT-POL-A', rules: ['-p tcp --dport 80 -j ACCEPT', '-j DROP'] },
        ],
        lines: ['-I FORWARD 1 -j KRT-FORWARD'],
        deleteChains: ['KRT-POL-OLD'],
      },
    ]);
    expect(input).toBe(
      [
        '*filter',
        ':KRT-FORWARD - [0:0]',
        ':KRT-POL-A - [0:0]',
        ':KRT-POL-OLD - [0:0]',
        '-A KRT-FORWARD -d 10.0.0.5/32 -j KRT-POL-A',
        '-A KRT-POL-A -p tcp --dport 80 -j ACCEPT',
        '-A KRT-POL-A -j DROP',
        '-I FORWARD 1 -j KRT-FORWARD',
        '-X KRT-POL-OLD',
        'COMMIT',
        '',
      ].join('\n'),
    );
  });

  it('renders nothing for no tables', () => {
    expect(renderIptablesRestore([])).toBe('');
  });

  it.each([
    ['a built-in chain', 'FORWARD', /refusing to declare built-in chain FORWARD/],
    ['a too long name', 'K'.repeat(29), /longer than 28/],
    ['a name with a space', 'KRT A', /invalid chain name/],
    ['a name like an option', '-X', /invalid chain name/],
  ])('refuses %s', (_case, name, message) => {
    expect(() => renderIptablesRestore([{ table: 'filter', chains: [{ name, rules: [] }] }])).toThrow(message);
  });

  it('refuses a rule that would smuggle in another line', () => {
    expect(() =>
      renderIptablesRestore([{ table: 'filter', chains: [{ name: 'KRT-A', rules: ['-j ACCEPT\n-F FORWARD'] }] }]),
    ).toThrow(/line break/);
  });
});

describe('blameRestoreFailure', () => {
  const input = '*filter\n:KRT-A - [0:0]\n-A KRT-A -j ACCEPT\n-A KRT-A -j KRT-MISSING\nCOMMIT\n';

  it.each([
    ['legacy: the failing line', 'iptables-restore: line 4 failed', { line: 4, text: '-A KRT-A -j KRT-MISSING' }],
    [
      'nf_tables: the rule naming the missing chain rather than COMMIT',
      "iptables-restore v1.8.9 (nf_tables): Chain 'KRT-MISSING' does not exist\nError occurred at line: 5\n",
      { line: 4, text: '-A KRT-A -j KRT-MISSING' },
    ],
    ['nothing when stderr names no line', 'iptables-restore: out of memory', undefined],
  ])('%s', (_case, stderr, expected) => {
    expect(blameRestoreFailure(stderr, input)).toEqual(expected);
  });
});
