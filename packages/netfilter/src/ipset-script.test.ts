import { describe, expect, it } from 'vitest';
import { Ipset } from './ipset.js';
import { RecordingRunner } from './recording-runner.js';
import { IpsetScript, ipsetNetElements } from './ipset-script.js';
import { parseIpsetNames, parseIpsetSave } from './ipset-save.js';

describe('IpsetScript', () => {
  it('renders create, add, del, flush, swap and destroy lines', () => {
    const script = new IpsetScript()
      .create({ name: 'krt-a', type: 'hash:net', family: 'ipv6', hashSize: 2048, maxElements: 131072 })
      .create({ name: 'krt-p', type: 'bitmap:port', family: 'ipv4' })
      .create({ name: 'krt-t', type: 'hash:ip,port', family: 'ipv4', timeout: 60, comment: true })
      .add('krt-a', 'fd00::/64')
      .add('krt-a', { element: 'fd00::/80', nomatch: true })
      .del('krt-a', 'fd01::/64')
      .flush('krt-p')
      .swap('krt-a', 'krt-b')
      .destroy('krt-b');
    expect(script.lineCount).toBe(9);
    expect(script.toString()).toBe(
      [
        'create krt-a hash:net family inet6 hashsize 2048 maxelem 131072',
        'create krt-p bitmap:port',
        'create krt-t hash:ip,port family inet timeout 60 comment',
        'add krt-a fd00::/64',
        'add krt-a fd00::/80 nomatch',
        'del krt-a fd01::/64',
        'flush krt-p',
        'swap krt-a krt-b',
        'destroy krt-b',
        '',
      ].join('\n'),
    );
  });

  it('replaces members through a temporary set, creating the target only when asked', () => {
    const spec = { name: 'krt-dst', type: 'hash:ip', family: 'ipv4' } as const;
    expect(
      new IpsetScript().replaceMembers(spec, ['10.0.0.1'], { tempName: 'krt-tmp', createTarget: true }).toString(),
    ).toBe(
      [
        'create krt-tmp hash:ip family inet',
        'flush krt-tmp',
        'add krt-tmp 10.0.0.1',
        'create krt-dst hash:ip family inet',
        'swap krt-tmp krt-dst',
        'destroy krt-tmp',
        '',
      ].join('\n'),
    );
    expect(
      new IpsetScript().replaceMembers(spec, [], { tempName: 'krt-tmp', createTarget: false }).toString(),
    ).not.toContain('create krt-dst');
  });

  it.each([
    ['a 32 character name', () => new IpsetScript().flush('k'.repeat(32)), /longer than 31/],
    ['a name with a space', () => new IpsetScript().flush('krt a'), /invalid ipset name/],
    [
      'an element with a line break',
      () => new IpsetScript().add('krt-a', '10.0.0.1\nflush x'),
      /invalid ipset element/,
    ],
    ['an empty element', () => new IpsetScript().add('krt-a', ''), /invalid ipset element/],
    [
      'a zero maxelem',
      () => new IpsetScript().create({ name: 'a', type: 'hash:ip', maxElements: 0 }),
      /positive integer/,
    ],
  ])('refuses %s', (_case, build, message) => {
    expect(build).toThrow(message);
  });

  it.each([
    ['0.0.0.0/0', ['0.0.0.0/1', '128.0.0.0/1']],
    ['::/0', ['::/1', '8000::/1']],
    ['10.0.0.0/8', ['10.0.0.0/8']],
    ['fd00::/8', ['fd00::/8']],
  ])('splits %s for hash:net', (cidr, elements) => {
    expect(ipsetNetElements(cidr)).toEqual(elements);
  });
});

describe('parseIpsetSave', () => {
  it('reads sets, families, options and members', () => {
    const saved = [
      'create krt-a hash:ip family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x5586242a',
      'add krt-a 10.0.0.1',
      'add krt-a 10.0.0.2',
      'create krt-b hash:net family inet6 hashsize 1024 maxelem 65536 counters comment bucketsize 12 initval 0x1',
      'add krt-b fd00::/64 packets 0 bytes 0 comment "a b"',
      'add krt-b fd00::/80 nomatch packets 0 bytes 0',
      'create krt-p bitmap:port range 0-65535',
      '',
    ].join('\n');
    expect(parseIpsetSave(saved)).toEqual([
      {
        name: 'krt-a',
        type: 'hash:ip',
        family: 'ipv4',
        options: { family: 'inet', hashsize: '1024', maxelem: '65536', bucketsize: '12', initval: '0x5586242a' },
        members: ['10.0.0.1', '10.0.0.2'],
      },
      {
        name: 'krt-b',
        type: 'hash:net',
        family: 'ipv6',
        options: {
          family: 'inet6',
          hashsize: '1024',
          maxelem: '65536',
          counters: true,
          comment: true,
          bucketsize: '12',
          initval: '0x1',
        },
        members: ['fd00::/64 packets 0 bytes 0 comment "a b"', 'fd00::/80 nomatch packets 0 bytes 0'],
      },
      { name: 'krt-p', type: 'bitmap:port', family: undefined, options: { range: '0-65535' }, members: [] },
    ]);
  });

  it('rejects a member of an unknown set', () => {
    expect(() => parseIpsetSave('add krt-x 10.0.0.1\n')).toThrow(/line 1/);
  });

  it('reads ipset list -n', () => {
    expect(parseIpsetNames('krt-a\nkrt-b\n\n')).toEqual(['krt-a', 'krt-b']);
  });
});

describe('Ipset.saveOwn', () => {
  it('lists again when one of its sets is destroyed between the listing and the save, and gives up after three', async () => {
    let names = 'krt-a\nkrt-b\nforeign\n';
    const runner = new RecordingRunner()
      .on('ipset list -n', () => ({ stdout: names }))
      .once('ipset restore', () => {
        names = 'krt-a\nforeign\n';
        return { exitCode: 1, stderr: 'ipset v7.17: Error in line 2: The set with the given name does not exist' };
      })
      .on('ipset restore', (spec) => ({ stdout: spec.input === 'save krt-a\n' ? 'create krt-a hash:ip family inet\nadd krt-a 10.0.0.1\n' : '' }));
    const { sets, names: listed } = await new Ipset({ runner }).saveOwn((name) => name.startsWith('krt-'));
    expect(sets.map((set) => [set.name, [...set.members]])).toEqual([['krt-a', ['10.0.0.1']]]);
    expect(listed).toEqual(['krt-a', 'foreign']);

    const gone = new RecordingRunner()
      .on('ipset list -n', { stdout: 'krt-a\n' })
      .on('ipset restore', { exitCode: 1, stderr: 'ipset v7.17: Error in line 1: The set with the given name does not exist' });
    await expect(new Ipset({ runner: gone }).saveOwn(() => true)).rejects.toThrow(/does not exist/);
    expect(gone.lines().filter((line) => line === 'ipset list -n')).toHaveLength(3);

    // Any other failure is not retried.
    const refused = new RecordingRunner().on('ipset list -n', { stdout: 'krt-a\n' }).on('ipset restore', { exitCode: 1, stderr: 'ipset v7.17: Kernel error received: Operation not permitted' });
    await expect(new Ipset({ runner: refused }).saveOwn(() => true)).rejects.toThrow(/not permitted/);
    expect(refused.lines().filter((line) => line === 'ipset list -n')).toHaveLength(1);
  });
});
