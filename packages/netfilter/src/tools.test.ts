import { describe, expect, it } from 'vitest';
import { IpRoute2 } from './ip.js';
import { Ipset } from './ipset.js';
import { Iptables } from './iptables.js';
import { Mutex } from './mutex.js';
import { ExecRunner } from './exec-runner.js';
import { Nft } from './nft.js';
import { RecordingRunner } from './recording-runner.js';

describe('tool runners with a recording runner', () => {
  it('serialises commands of one tool family', async () => {
    let running = 0;
    let maxRunning = 0;
    const runner = new RecordingRunner().on('iptables-restore', async () => {
      running++;
      maxRunning = Math.max(maxRunning, running);
      await new Promise((resolve) => setTimeout(resolve, 10));
      running--;
      return {};
    });
    const lock = new Mutex();
    const v4 = new Iptables({ runner, lock });
    const v4again = new Iptables({ runner, lock });
    await Promise.all([v4.restore('a'), v4again.restore('b'), v4.restore('c')]);
    expect(maxRunning).toBe(1);
    expect(runner.invocations.map((invocation) => invocation.input)).toEqual(['a', 'b', 'c']);
  });

  it('ipset replace creates the target only when it is missing and clears a leftover temporary set', async () => {
    const runner = new RecordingRunner()
      .once('ipset list -n', { stdout: 'krt-tmp\n' })
      .once('ipset list -n', { stdout: 'krt-dst\n' });
    const ipset = new Ipset({ runner, netns: 'krt-n' });
    const spec = { name: 'krt-dst', type: 'hash:ip', family: 'ipv4' } as const;
    await ipset.replace(spec, ['10.0.0.1'], 'krt-tmp');
    await ipset.replace(spec, ['10.0.0.2'], 'krt-tmp');
    const restores = runner.invocations.filter((invocation) => invocation.line === 'ipset restore -exist');
    expect(restores.map((invocation) => invocation.input)).toEqual([
      'destroy krt-tmp\ncreate krt-tmp hash:ip family inet\nflush krt-tmp\nadd krt-tmp 10.0.0.1\ncreate krt-dst hash:ip family inet\nswap krt-tmp krt-dst\ndestroy krt-tmp\n',
      'create krt-tmp hash:ip family inet\nflush krt-tmp\nadd krt-tmp 10.0.0.2\nswap krt-tmp krt-dst\ndestroy krt-tmp\n',
    ]);
    expect(runner.invocations.every((invocation) => invocation.netns === 'krt-n')).toBe(true);
  });

  it('ipset skips an empty script', async () => {
    const runner = new RecordingRunner();
    await new Ipset({ runner }).restore('');
    expect(runner.invocations).toEqual([]);
  });

  it('ip batch feeds the commands on stdin, with -force when asked', async () => {
    const runner = new RecordingRunner();
    const ip = new IpRoute2({ runner });
    await ip.batch(['route replace 10.0.0.0/24 dev eth0'], { force: true });
    await ip.batch([]);
    expect(runner.invocations).toEqual([
      expect.objectContaining({ line: 'ip -force -batch -', input: 'route replace 10.0.0.0/24 dev eth0\n' }),
    ]);
    await expect(ip.batch(['route add 1.0.0.0/8 dev x\nlink del eth0'])).rejects.toThrow(/line break/);
  });

  it('ip json reads empty output as an empty list', async () => {
    const runner = new RecordingRunner().on('ip -j link show', { stdout: '' });
    await expect(new IpRoute2({ runner }).links()).resolves.toEqual([]);
  });

  it('ip routes asks for the family, table and protocol', async () => {
    const runner = new RecordingRunner().on('ip', { stdout: '[]' });
    await new IpRoute2({ runner }).routes({ family: 'ipv6', table: 'main', protocol: 'bird' });
    expect(runner.lines()).toEqual(['ip -j -6 route show table main proto bird']);
  });

  it('nft applies on stdin and checks without applying', async () => {
    const runner = new RecordingRunner().on('nft -j list', {
      stdout: '{"nftables":[{"table":{"family":"ip","name":"x","handle":1}}]}',
    });
    const nft = new Nft({ runner, timeoutMs: 1234 });
    await nft.apply('flush ruleset\n');
    await nft.check('add table ip x\n');
    expect((await nft.list(['tables'])).tables).toEqual([{ family: 'ip', name: 'x', handle: 1 }]);
    expect(runner.invocations.map((invocation) => [invocation.line, invocation.input, invocation.timeoutMs])).toEqual([
      ['nft -f -', 'flush ruleset\n', 1234],
      ['nft -c -f -', 'add table ip x\n', 1234],
      ['nft -j list tables', undefined, 1234],
    ]);
  });

  it("an Nft's apply resolves with the command's own duration, not the wait for its lock", async () => {
    const lock = new Mutex();
    // `sh -f -` reads its commands from stdin as `nft -f -` does: a real command of a known length.
    const nft = new Nft({ runner: new ExecRunner(), lock, command: 'sh' });
    let release: () => void = () => undefined;
    const holding = lock.runExclusive(() => new Promise<void>((resolve) => (release = resolve)));
    const started = performance.now();
    const applied = nft.apply('sleep 0.03\n');
    setTimeout(() => release(), 200);
    const result = await applied;
    await holding;
    expect(performance.now() - started).toBeGreaterThanOrEqual(200);
    expect(result.durationMs).toBeGreaterThanOrEqual(25);
    expect(result.durationMs).toBeLessThan(150);
  });

  it('an Nft refuses an empty list of locks, which would serialise nothing', () => {
    expect(() => new Nft({ runner: new RecordingRunner(), lock: [] })).toThrow(/at least one mutex/);
  });

  it('an Nft given several locks holds them all: it waits for each table, and one-table Nfts still run side by side', async () => {
    const events: string[] = [];
    const runner = new RecordingRunner().on('nft -f', async (spec) => {
      events.push(`start ${spec.input}`);
      await new Promise((resolve) => setTimeout(resolve, 15));
      events.push(`end ${spec.input}`);
      return {};
    });
    const [four, six] = [new Mutex(), new Mutex()];
    const ipv4 = new Nft({ runner, lock: four });
    const ipv6 = new Nft({ runner, lock: six });
    const both = new Nft({ runner, lock: [four, six] });
    const first = Promise.all([ipv4.apply('4'), ipv6.apply('6'), both.apply('46')]);
    // Issued while the two-table transaction waits for or holds the IPv4 table: it goes after it.
    await new Promise((resolve) => setTimeout(resolve, 20));
    await Promise.all([first, ipv4.apply('4 again')]);
    expect(events).toEqual([
      'start 4',
      'start 6',
      'end 4',
      'end 6',
      // Only with both tables free: the two-table transaction, alone.
      'start 46',
      'end 46',
      'start 4 again',
      'end 4 again',
    ]);
  });

  it('Nfts given the same locks in other orders take them in one order, so that they never wait for each other', async () => {
    const runner = new RecordingRunner().on('nft -f', async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      return {};
    });
    const [four, six] = [new Mutex(), new Mutex()];
    const ipv4 = new Nft({ runner, lock: four });
    const ipv6 = new Nft({ runner, lock: six });
    const forward = new Nft({ runner, lock: [four, six] });
    const backward = new Nft({ runner, lock: [six, four, six] });
    // With the locks taken as given, forward would hold the IPv4 table waiting for the IPv6 one while backward held
    // the IPv6 table waiting for the IPv4 one (the one-table writes keep both busy so that both get their first).
    const all = Promise.all([ipv4.apply('4'), ipv6.apply('6'), forward.apply('46'), backward.apply('64'), ipv4.apply('4'), ipv6.apply('6')]);
    const timedOut = new Promise((resolve) => setTimeout(() => resolve('deadlock'), 2_000));
    expect(await Promise.race([all.then(() => 'done'), timedOut])).toBe('done');
  });
});
