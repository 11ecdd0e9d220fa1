import { beforeAll, describe, expect, it } from 'vitest';
import { CommandError } from './command.js';
import type { CommandRunner, CommandSpec } from './command.js';
import { ExecRunner } from './exec-runner.js';
import { Ipset } from './ipset.js';
import { IpsetScript } from './ipset-script.js';
import { missingForRealTests, useTestNetns } from './testing/netns.js';

const missing = missingForRealTests('ipset');

describe.skipIf(missing !== undefined)(`ipset in a network namespace ${missing ? `(skipped: ${missing})` : ''}`, () => {
  const netns = useTestNetns();
  let ipset: Ipset;
  beforeAll(() => {
    ipset = new Ipset({ runner: netns.runner, netns: netns.name });
  });

  it('creates sets of both families and lists them', async () => {
    await ipset.restore(
      new IpsetScript()
        .create({ name: 'krt-v4', type: 'hash:ip', family: 'ipv4' })
        .add('krt-v4', '10.0.0.1')
        .add('krt-v4', '10.0.0.2')
        .create({ name: 'krt-v6net', type: 'hash:net', family: 'ipv6' })
        .add('krt-v6net', 'fd00::/64')
        .add('krt-v6net', { element: 'fd00::/80', nomatch: true })
        .create({ name: 'krt-v4port', type: 'hash:ip,port', family: 'ipv4' })
        .add('krt-v4port', '10.0.0.1,tcp:80')
        .add('krt-v4port', '10.0.0.1,sctp:9000'),
    );
    expect((await ipset.listNames()).sort()).toEqual(['krt-v4', 'krt-v4port', 'krt-v6net']);
    const saved = await ipset.save();
    const byName = new Map(saved.map((set) => [set.name, set]));
    expect(byName.get('krt-v4')).toMatchObject({ type: 'hash:ip', family: 'ipv4' });
    expect([...byName.get('krt-v4')!.members].sort()).toEqual(['10.0.0.1', '10.0.0.2']);
    expect(byName.get('krt-v6net')).toMatchObject({ type: 'hash:net', family: 'ipv6' });
    expect([...byName.get('krt-v6net')!.members].sort()).toEqual(['fd00::/64', 'fd00::/80 nomatch']);
    expect([...byName.get('krt-v4port')!.members].sort()).toEqual(['10.0.0.1,sctp:9000', '10.0.0.1,tcp:80']);
  });

  it('saves its own sets by name, never dumping another tool’s, and names every set', async () => {
    await ipset.restore(
      new IpsetScript()
        .create({ name: 'krt-own-a', type: 'hash:ip', family: 'ipv4' })
        .add('krt-own-a', '10.1.0.1')
        .create({ name: 'krt-own-b', type: 'hash:net', family: 'ipv6' })
        .add('krt-own-b', 'fd01::/64')
        .create({ name: 'istio-inpod-probes-v4', type: 'hash:ip', family: 'ipv4' })
        .add('istio-inpod-probes-v4', '10.9.9.9'),
    );
    const ran: CommandSpec[] = [];
    const watched: CommandRunner = { run: (spec) => (ran.push(spec), netns.runner.run(spec)) };
    const own = new Ipset({ runner: watched, netns: netns.name });
    const { sets, names } = await own.saveOwn((name) => name.startsWith('krt-own-'));
    expect(sets.map((set) => [set.name, [...set.members]])).toEqual([
      ['krt-own-a', ['10.1.0.1']],
      ['krt-own-b', ['fd01::/64']],
    ]);
    expect(names).toContain('istio-inpod-probes-v4');
    // A dump holds each set it lists busy (EBUSY for another tool's swap or destroy): only our sets are dumped.
    expect(ran.map((spec) => [spec.args?.join(' '), spec.input ?? ''])).toEqual([
      ['list -n', ''],
      ['restore', 'save krt-own-a\nsave krt-own-b\n'],
    ]);
    expect(await own.saveOwn((name) => name === 'krt-none')).toEqual({ sets: [], names: expect.arrayContaining(['krt-own-a']) });
    await ipset.run(['destroy', 'istio-inpod-probes-v4']);
  });

  it('keeps sets inside the namespace', async () => {
    const host = new Ipset({ runner: new ExecRunner() });
    expect(await host.listNames()).not.toContain('krt-v4');
  });

  it('is idempotent under -exist', async () => {
    const script = new IpsetScript()
      .create({ name: 'krt-v4', type: 'hash:ip', family: 'ipv4' })
      .add('krt-v4', '10.0.0.1');
    await ipset.restore(script);
    await ipset.restore(script);
    expect((await ipset.save('krt-v4'))[0]!.members).toHaveLength(2);
  });

  it('replaces members atomically through a swap, creating the set when missing', async () => {
    await ipset.replace({ name: 'krt-repl', type: 'hash:ip', family: 'ipv6' }, ['fd00::1', 'fd00::2'], 'krt-repl-tmp');
    expect([...(await ipset.save('krt-repl'))[0]!.members].sort()).toEqual(['fd00::1', 'fd00::2']);
    await ipset.replace(
      { name: 'krt-repl', type: 'hash:ip', family: 'ipv6', maxElements: 131072 },
      ['fd00::3'],
      'krt-repl-tmp',
    );
    expect((await ipset.save('krt-repl'))[0]!.members).toEqual(['fd00::3']);
    expect(await ipset.listNames()).not.toContain('krt-repl-tmp');
  });

  it('fails a bad script with stderr and the blamed line; it is no transaction, so replace() goes through a swap', async () => {
    const script = new IpsetScript()
      .create({ name: 'krt-bad', type: 'hash:ip', family: 'ipv4' })
      .add('krt-bad', '10.0.0.1')
      .add('krt-bad', 'fd00::1')
      .add('krt-bad', '10.0.0.3');
    const error = (await ipset.restore(script).catch((e: unknown) => e)) as CommandError;
    expect(error).toBeInstanceOf(CommandError);
    expect(error.stderr).toMatch(/line 3/i);
    expect(error.message).toContain('input line 3: add krt-bad fd00::1');
    // The set created before the bad line exists; nothing after the bad line was applied.
    const [partial] = await ipset.save('krt-bad');
    expect(partial?.members).not.toContain('10.0.0.3');
  });

  it('destroys sets', async () => {
    await ipset.destroy('krt-bad');
    expect(await ipset.listNames()).not.toContain('krt-bad');
    await expect(ipset.destroy('krt-bad')).rejects.toThrow(/does not exist/);
  });
});
