import { beforeAll, describe, expect, it } from 'vitest';
import { CommandError } from './command.js';
import { Nft } from './nft.js';
import { missingForRealTests, useTestNetns } from './testing/netns.js';

const missing = missingForRealTests('nft');

const table = `table inet krt-test {
  set allowed4 {
    type ipv4_addr
    flags interval
    elements = { 10.0.0.0/8, 192.0.2.1 }
  }
  set allowed6 {
    type ipv6_addr
    elements = { fd00::1 }
  }
  chain input {
    type filter hook input priority 0; policy accept;
    ip saddr @allowed4 tcp dport 80 accept comment "web"
  }
}
`;

describe.skipIf(missing !== undefined)(`nft in a network namespace ${missing ? `(skipped: ${missing})` : ''}`, () => {
  const netns = useTestNetns();
  let nft: Nft;
  beforeAll(() => {
    nft = new Nft({ runner: netns.runner, netns: netns.name });
  });

  it('applies a script and lists it back as JSON', async () => {
    await nft.check(table);
    expect((await nft.list()).tables).toEqual([]);
    await nft.apply(table);
    const ruleset = await nft.list(['table', 'inet', 'krt-test']);
    expect(ruleset.tables.map((t) => `${t.family} ${t.name}`)).toEqual(['inet krt-test']);
    expect(ruleset.chains).toMatchObject([{ name: 'input', hook: 'input', policy: 'accept' }]);
    expect(ruleset.rules).toMatchObject([{ chain: 'input', comment: 'web' }]);
    const sets = new Map(ruleset.sets.map((set) => [set.name, set.elements]));
    expect(sets.get('allowed4')).toEqual(['10.0.0.0/8', '192.0.2.1']);
    expect(sets.get('allowed6')).toEqual(['fd00::1']);
  });

  it('rejects a bad script as a whole, with stderr and the blamed line', async () => {
    const script =
      'add element inet krt-test allowed6 { fd00::2 }\nadd rule inet krt-test input tcp dport 81 acceptx\n';
    const error = (await nft.apply(script).catch((e: unknown) => e)) as CommandError;
    expect(error).toBeInstanceOf(CommandError);
    expect(error.stderr).toContain('Error');
    expect(error.message).toContain('input line 2: add rule inet krt-test input tcp dport 81 acceptx');
    const sets = new Map((await nft.list()).sets.map((set) => [set.name, set.elements]));
    expect(sets.get('allowed6')).toEqual(['fd00::1']);
  });

  it('deletes only the listed ones of the tables it is given, and names no other', async () => {
    await nft.apply('add table ip krt-delete-a\nadd table ip6 krt-delete-b\nadd table inet krt-keep\n');
    const runs: string[] = [];
    const watched = new Nft({
      runner: { run: (spec) => (runs.push(`${(spec.args ?? []).join(' ')} ${spec.input ?? ''}`.trim()), netns.runner.run(spec)) },
      netns: netns.name,
    });
    const deleted = await watched.deleteTables([
      { family: 'ip', name: 'krt-delete-a' },
      { family: 'ip6', name: 'krt-delete-b' },
      { family: 'ip6', name: 'krt-never-made' },
    ]);
    expect(deleted).toBe(2);
    const left = (await nft.list(['tables'])).tables.map((t) => `${t.family} ${t.name}`);
    expect(left).toContain('inet krt-keep');
    expect(left).not.toContain('ip krt-delete-a');
    expect(left).not.toContain('ip6 krt-delete-b');
    // A table nft does not list is never named: on a kernel without IPv6, naming an ip6 table fails.
    expect(runs.some((run) => run.includes('krt-never-made'))).toBe(false);
    expect(await watched.deleteTables([{ family: 'ip', name: 'krt-delete-a' }])).toBe(0);
    await nft.apply('delete table inet krt-keep\n');
  });

  it('replaces a table atomically within one transaction', async () => {
    await nft.apply(`delete table inet krt-test\n${table.replace('192.0.2.1', '192.0.2.2')}`);
    const sets = new Map((await nft.list()).sets.map((set) => [set.name, set.elements]));
    expect(sets.get('allowed4')).toEqual(['10.0.0.0/8', '192.0.2.2']);
  });
});
