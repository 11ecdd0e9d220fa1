import { describe, expect, it } from 'vitest';
import { elementText, parseNftJson } from './nft-json.js';

const listed = JSON.stringify({
  nftables: [
    { metainfo: { version: '1.0.6', json_schema_version: 1 } },
    { table: { family: 'inet', name: 't', handle: 1 } },
    {
      set: {
        family: 'inet',
        name: 's',
        table: 't',
        type: 'ipv4_addr',
        handle: 2,
        flags: ['interval'],
        elem: ['1.2.3.4', { range: ['5.5.5.5', '5.5.5.9'] }, { prefix: { addr: '10.0.0.0', len: 8 } }],
      },
    },
    {
      set: {
        family: 'inet',
        name: 'p',
        table: 't',
        type: ['ipv4_addr', 'inet_service'],
        handle: 3,
        elem: [{ concat: ['1.2.3.4', 80] }],
      },
    },
    {
      map: {
        family: 'inet',
        name: 'm',
        table: 't',
        type: 'ipv4_addr',
        handle: 4,
        map: 'verdict',
        elem: [
          ['1.1.1.1', { accept: null }],
          ['2.2.2.2', { jump: { target: 'c' } }],
        ],
      },
    },
    {
      chain: {
        family: 'inet',
        table: 't',
        name: 'c',
        handle: 1,
        type: 'filter',
        hook: 'input',
        prio: 0,
        policy: 'accept',
      },
    },
    { rule: { family: 'inet', table: 't', chain: 'c', handle: 5, comment: 'hi', expr: [{ accept: null }] } },
  ],
});

describe('parseNftJson', () => {
  const ruleset = parseNftJson(listed);

  it('reads tables, chains and rules', () => {
    expect(ruleset.tables).toEqual([{ family: 'inet', name: 't', handle: 1 }]);
    expect(ruleset.chains).toEqual([
      { family: 'inet', table: 't', name: 'c', handle: 1, type: 'filter', hook: 'input', prio: 0, policy: 'accept' },
    ]);
    expect(ruleset.rules).toEqual([
      { family: 'inet', table: 't', chain: 'c', handle: 5, comment: 'hi', expr: [{ accept: null }] },
    ]);
  });

  it('writes set elements in nft notation', () => {
    expect(ruleset.sets.map((set) => [set.name, set.type, set.flags, set.elements])).toEqual([
      ['s', 'ipv4_addr', ['interval'], ['1.2.3.4', '5.5.5.5-5.5.5.9', '10.0.0.0/8']],
      ['p', ['ipv4_addr', 'inet_service'], [], ['1.2.3.4 . 80']],
    ]);
  });

  it('reads verdict maps', () => {
    expect(ruleset.maps[0]).toMatchObject({
      name: 'm',
      map: 'verdict',
      elements: ['1.1.1.1', '2.2.2.2'],
      entries: ['1.1.1.1 : accept', '2.2.2.2 : jump c'],
    });
  });

  it('reads named counter objects with their values, and not the counter statements of rules', () => {
    const ruleset = parseNftJson(
      JSON.stringify({
        nftables: [
          { counter: { family: 'ip', name: 'in-web', table: 't', handle: 4, packets: 12, bytes: 900 } },
          { rule: { family: 'ip', table: 't', chain: 'c', handle: 5, expr: [{ counter: { packets: 1, bytes: 60 } }, { accept: null }] } },
        ],
      }),
    );
    expect(ruleset.counters).toEqual([{ family: 'ip', table: 't', name: 'in-web', packets: 12, bytes: 900 }]);
  });

  it('reads empty output as an empty ruleset and refuses other JSON', () => {
    expect(parseNftJson('')).toEqual({ tables: [], chains: [], rules: [], sets: [], maps: [], counters: [] });
    expect(() => parseNftJson('{"foo": 1}')).toThrow(/no "nftables" array/);
  });

  it('unwraps timed elements', () => {
    expect(elementText({ elem: { val: '10.0.0.1', timeout: 30 } })).toBe('10.0.0.1');
  });
});
