import { RecordingRunner } from '@kube-router/netfilter';
import { describe, expect, it } from 'vitest';
import { BridgeHairpin } from './bridge-hairpin.js';

const PORTS = JSON.stringify([
  { ifname: 'veth-a', linkinfo: { info_kind: 'veth', info_slave_kind: 'bridge', info_slave_data: { hairpin: false } } },
  { ifname: 'veth-b', linkinfo: { info_kind: 'veth', info_slave_kind: 'bridge', info_slave_data: { hairpin: true } } },
  { ifname: 'veth-c', linkinfo: { info_kind: 'veth', info_slave_kind: 'bridge', info_slave_data: { hairpin: false } } },
]);
const ADDRESSES = JSON.stringify([
  {
    ifname: 'kube-bridge',
    addr_info: [
      { family: 'inet', local: '10.244.0.1', prefixlen: 24, scope: 'global' },
      { family: 'inet6', local: 'fd00:244::1', prefixlen: 64, scope: 'global' },
      { family: 'inet6', local: 'fe80::1', prefixlen: 64, scope: 'link' },
    ],
  },
]);
const FDB = JSON.stringify([
  { mac: 'aa:00:00:00:00:0a', ifname: 'veth-a', master: 'kube-bridge', state: '' },
  { mac: 'aa:00:00:00:00:0b', ifname: 'veth-b', master: 'kube-bridge', state: '' },
  { mac: 'ee:00:00:00:00:01', ifname: 'veth-a', master: 'kube-bridge', state: 'permanent' },
  { mac: '33:33:00:00:00:01', ifname: 'kube-bridge', flags: ['self'], state: 'permanent' },
]);

function node(neighbours: object[], fdb = FDB): RecordingRunner {
  return new RecordingRunner({ strict: true })
    .on('ip -j -d link show master kube-bridge', { stdout: PORTS })
    .on('ip -j address show dev kube-bridge', { stdout: ADDRESSES })
    .on('ip -j neigh show dev kube-bridge', { stdout: JSON.stringify(neighbours) })
    .on('bridge -j fdb show br kube-bridge', { stdout: fdb })
    .on('ip -force -batch -', {});
}

const batches = (runner: RecordingRunner) => runner.invocations.filter((call) => call.args.includes('-batch')).map((call) => call.input?.trim().split('\n'));

describe('BridgeHairpin', () => {
  it('runs nothing without addresses', async () => {
    const runner = new RecordingRunner({ strict: true });
    expect(await new BridgeHairpin({ runner, timeoutMs: 1000 }).ensure([])).toMatchObject({ enabled: [], failures: new Map() });
    expect(runner.lines()).toEqual([]);
  });

  it('does nothing where there is no kube-bridge (a routed pod network)', async () => {
    const runner = new RecordingRunner({ strict: true }).on('ip -j -d link show master kube-bridge', { exitCode: 1, stderr: 'Error: argument "kube-bridge" is wrong: Device does not exist\n' });
    const report = await new BridgeHairpin({ runner, timeoutMs: 1000, netns: 'node' }).ensure(['10.244.0.2']);
    expect(report).toMatchObject({ bridgePresent: false, enabled: [] });
    expect(runner.invocations.map((call) => [call.line, call.netns])).toEqual([['ip -j -d link show master kube-bridge', 'node']]);
  });

  it('turns hairpin on for the port that pod IP -> neighbour MAC -> learned FDB entry leads to, once per port', async () => {
    const runner = node([
      { dst: '10.244.0.2', lladdr: 'AA:00:00:00:00:0A', state: ['REACHABLE'] },
      { dst: 'fd00:244::2', lladdr: 'aa:00:00:00:00:0a', state: ['STALE'] },
      { dst: '10.244.0.3', lladdr: 'aa:00:00:00:00:0b', state: ['STALE'] },
    ]);
    const report = await new BridgeHairpin({ runner, timeoutMs: 1000, settleMs: 0 }).ensure(['10.244.0.2', 'fd00:244::2', '10.244.0.3', '192.168.1.10']);
    expect(report.failures).toEqual(new Map());
    // veth-b already has it; 192.168.1.10 (a host-network endpoint) is not on the bridge and is left alone.
    expect(report.enabled).toEqual(['veth-a']);
    expect(report.ports).toEqual(new Map([['10.244.0.2', 'veth-a'], ['fd00:244::2', 'veth-a'], ['10.244.0.3', 'veth-b']]));
    expect(batches(runner)).toEqual([['link set dev veth-a type bridge_slave hairpin on']]);
  });

  it('asks the kernel for what it does not know yet, and fails only the addresses still unknown after that', async () => {
    const runner = node([{ dst: '10.244.0.5', lladdr: 'aa:00:00:00:00:0c', state: ['STALE'] }, { dst: '10.244.0.7', state: ['FAILED'] }]);
    const report = await new BridgeHairpin({ runner, timeoutMs: 1000, settleMs: 0 }).ensure(['10.244.0.4', '10.244.0.5', '10.244.0.7']);
    expect(batches(runner)).toEqual([
      [
        'neigh replace 10.244.0.4 dev kube-bridge managed',
        'neigh replace 10.244.0.5 dev kube-bridge lladdr aa:00:00:00:00:0c nud probe',
        'neigh replace 10.244.0.7 dev kube-bridge managed',
      ],
    ]);
    // Looked again once after asking: two reads of each table.
    expect(runner.lines().filter((line) => line.startsWith('bridge -j fdb'))).toHaveLength(2);
    expect([...report.failures.keys()]).toEqual(['10.244.0.4', '10.244.0.5', '10.244.0.7']);
    expect(report.failures.get('10.244.0.4')?.message).toMatch(/not found yet: no neighbour entry with a MAC address on kube-bridge; hairpin_mode is set at the next sync/);
    expect(report.failures.get('10.244.0.5')?.message).toMatch(/MAC aa:00:00:00:00:0c is not learned on any port of kube-bridge/);
  });

  it('finds on the second look what the kernel resolved, then drops the managed flag it asked for', async () => {
    const runner = node([])
      .once('ip -j neigh show dev kube-bridge', { stdout: '[]' })
      .on('ip -j neigh show dev kube-bridge', { stdout: JSON.stringify([{ dst: '10.244.0.2', lladdr: 'aa:00:00:00:00:0a', managed: null, state: ['REACHABLE'] }]) });
    const report = await new BridgeHairpin({ runner, timeoutMs: 1000, settleMs: 0 }).ensure(['10.244.0.2']);
    expect(report.failures).toEqual(new Map());
    expect(batches(runner)).toEqual([
      ['neigh replace 10.244.0.2 dev kube-bridge managed'],
      ['link set dev veth-a type bridge_slave hairpin on', 'neigh replace 10.244.0.2 dev kube-bridge lladdr aa:00:00:00:00:0a nud stale'],
    ]);
  });

  it('removes managed neighbours no endpoint wants any more, so that none is probed for ever', async () => {
    const runner = node([
      { dst: '10.244.0.2', lladdr: 'aa:00:00:00:00:0a', state: ['REACHABLE'] },
      { dst: '10.244.0.9', managed: null, state: ['FAILED'] },
    ]);
    await new BridgeHairpin({ runner, timeoutMs: 1000, settleMs: 0 }).ensure(['10.244.0.2']);
    expect(batches(runner)).toEqual([['link set dev veth-a type bridge_slave hairpin on', 'neigh del 10.244.0.9 dev kube-bridge']]);
  });

  it('fails the address whose port refused hairpin, and keeps going with the others', async () => {
    const runner = node([
      { dst: '10.244.0.2', lladdr: 'aa:00:00:00:00:0a', state: ['REACHABLE'] },
      { dst: '10.244.0.3', lladdr: 'aa:00:00:00:00:0d', state: ['REACHABLE'] },
    ], JSON.stringify([...JSON.parse(FDB), { mac: 'aa:00:00:00:00:0d', ifname: 'veth-c', master: 'kube-bridge', state: '' }])).on('ip -force -batch -', {
      exitCode: 1,
      stderr: 'RTNETLINK answers: Operation not permitted\nCommand failed -:1\n',
    });
    const report = await new BridgeHairpin({ runner, timeoutMs: 1000, settleMs: 0 }).ensure(['10.244.0.2', '10.244.0.3']);
    expect(report.enabled).toEqual(['veth-c']);
    expect([...report.failures.keys()]).toEqual(['10.244.0.2']);
    expect(report.failures.get('10.244.0.2')?.message).toMatch(/Operation not permitted/);
  });
});
