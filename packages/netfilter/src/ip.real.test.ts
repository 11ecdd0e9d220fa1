import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CommandError } from './command.js';
import { IpRoute2 } from './ip.js';
import { ExecRunner } from './exec-runner.js';
import { addNetns, deleteNetns, listNetns } from './netns.js';
import { missingForRealTests, useTestNetns } from './testing/netns.js';

const missing = missingForRealTests();

describe.skipIf(missing !== undefined)(`ip in a network namespace ${missing ? `(skipped: ${missing})` : ''}`, () => {
  const netns = useTestNetns();
  let ip: IpRoute2;
  beforeAll(() => {
    ip = new IpRoute2({ runner: netns.runner, netns: netns.name });
  });

  it('lists the namespace', async () => {
    expect(await listNetns(netns.runner)).toContain(netns.name);
  });

  it('runs a batch and reads links, addresses and routes as JSON', async () => {
    await ip.batch([
      'link add krt0 type veth peer name krt1',
      'link set krt0 up',
      'link set krt1 up',
      'address add 192.0.2.1/24 dev krt0',
      'address add 2001:db8::1/64 dev krt0 nodad',
      'route add 198.51.100.0/24 via 192.0.2.254 dev krt0 proto 99',
      'route add 2001:db8:1::/64 via 2001:db8::fe dev krt0 proto 99',
      'route add 203.0.113.0/24 dev krt0 table 100',
    ]);
    expect((await ip.links()).map((link) => link.ifname).sort()).toEqual(['krt0', 'krt1', 'lo']);
    const [krt0] = await ip.addresses('krt0');
    expect(krt0?.addr_info.filter((a) => a.scope === 'global').map((a) => `${a.local}/${a.prefixlen}`)).toEqual([
      '192.0.2.1/24',
      '2001:db8::1/64',
    ]);
    expect((await ip.routes({ protocol: 99 })).map((route) => [route.dst, route.gateway])).toEqual([
      ['198.51.100.0/24', '192.0.2.254'],
    ]);
    expect((await ip.routes({ family: 'ipv6', protocol: 99 })).map((route) => route.dst)).toEqual(['2001:db8:1::/64']);
    expect((await ip.routes({ table: 100 })).map((route) => route.dst)).toEqual(['203.0.113.0/24']);
    expect(await ip.routes({ table: 101 })).toEqual([]);
  });

  it('stops at the first failing batch command and blames it', async () => {
    const error = (await ip
      .batch([
        'route add 10.1.0.0/24 dev krt0',
        'route add 10.2.0.0/24 via 10.99.0.1',
        'route add 10.3.0.0/24 dev krt0',
      ])
      .catch((e: unknown) => e)) as CommandError;
    expect(error).toBeInstanceOf(CommandError);
    expect(error.message).toContain('input line 2: route add 10.2.0.0/24 via 10.99.0.1');
    expect(error.message).toMatch(/stderr: .*Nexthop has invalid gateway|stderr: .*unreachable/i);
    const destinations = (await ip.routes()).map((route) => route.dst);
    expect(destinations).toContain('10.1.0.0/24');
    expect(destinations).not.toContain('10.3.0.0/24');
  });

  it('runs every command with force and still fails', async () => {
    await expect(
      ip.batch(['route add 10.4.0.0/24 via 10.99.0.1', 'route add 10.5.0.0/24 dev krt0'], { force: true }),
    ).rejects.toThrow(CommandError);
    expect((await ip.routes()).map((route) => route.dst)).toContain('10.5.0.0/24');
  });
});

describe.skipIf(missing !== undefined)(`ip -force -batch, command by command ${missing ? `(skipped: ${missing})` : ''}`, () => {
  const runner = new ExecRunner({ defaultTimeoutMs: 10_000 });
  const netns = `trs-${randomBytes(4).toString('hex')}-ip`;
  let ip: IpRoute2;
  beforeAll(async () => {
    await addNetns(runner, netns);
    ip = new IpRoute2({ runner, netns });
    await ip.batch(['link add trs0 type veth peer name trs1', 'link set trs0 up', 'link set trs1 up', 'address add 192.0.2.1/24 dev trs0']);
  });
  afterAll(() => deleteNetns(runner, netns));

  it('runs every command and blames each failing one with its own stderr', async () => {
    const failures = await ip.batchEach([
      'route add 10.1.0.0/24 via 192.0.2.2 proto 17',
      'route add 10.2.0.0/24 via 10.99.0.1 proto 17',
      'route add 10.3.0.0/24 via 192.0.2.3 proto 17',
      'route add 10.1.0.0/24 via 192.0.2.4 proto 17',
      'route add 10.4.0.0/24 dev trs0 proto 17',
    ]);
    expect(failures.map((f) => [f.line, f.command])).toEqual([
      [2, 'route add 10.2.0.0/24 via 10.99.0.1 proto 17'],
      [4, 'route add 10.1.0.0/24 via 192.0.2.4 proto 17'],
    ]);
    expect(failures[0]!.error).toBeInstanceOf(CommandError);
    expect(failures[0]!.error.stderr).toMatch(/invalid gateway|unreachable/i);
    expect(failures[0]!.error.stderr).not.toMatch(/File exists/);
    expect(failures[1]!.error.message).toContain('File exists');
    expect(failures[1]!.error.message).toContain('input line 4: route add 10.1.0.0/24 via 192.0.2.4 proto 17');
    expect((await ip.routes({ protocol: 17 })).map((route) => [route.dst, route.gateway ?? route.dev])).toEqual([
      ['10.1.0.0/24', '192.0.2.2'],
      ['10.3.0.0/24', '192.0.2.3'],
      ['10.4.0.0/24', 'trs0'],
    ]);
  });

  it('resolves with no failures when every command succeeds', async () => {
    expect(await ip.batchEach(['route del 10.1.0.0/24 proto 17', 'route del 10.3.0.0/24 proto 17'])).toEqual([]);
    expect((await ip.routes({ protocol: 17 })).map((route) => route.dst)).toEqual(['10.4.0.0/24']);
  });

  it('rejects when ip stops early on a command it cannot parse, since what ran after it is unknown', async () => {
    const error = (await ip
      .batchEach(['route add 10.6.0.0/24 dev nosuch', 'route add 10.7.0.0/24 via 192.0.2.300', 'route add 10.8.0.0/24 dev trs0'])
      .catch((e: unknown) => e)) as CommandError;
    expect(error).toBeInstanceOf(CommandError);
    expect(error.message).toContain('ip stopped before the end of the batch');
    expect(error.stderr).toContain('192.0.2.300');
    expect((await ip.routes()).map((route) => route.dst)).not.toContain('10.8.0.0/24');
  });

  it('rejects when ip itself cannot run: no command is told apart', async () => {
    const elsewhere = new IpRoute2({ runner, netns: `${netns}-missing` });
    await expect(elsewhere.batchEach(['route add 10.5.0.0/24 dev trs0'])).rejects.toThrow(/Cannot open network namespace/);
  });
});
