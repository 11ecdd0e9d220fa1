import { IpRoute2, RecordingRunner } from '@kube-router/netfilter';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { HostNetworking } from './host-networking.js';
import { meshNode } from './testing/nodes.js';

function harness(options: { podNetwork?: boolean } = {}) {
  // No rule exists yet (`iptables -C` answers 1): each is added once, and the loops deleting old ones end.
  const runner = new RecordingRunner().on('ip', { stdout: '[]' }).on((spec) => spec.args?.includes('-C') ?? false, { exitCode: 1 });
  const host = new HostNetworking({
    runner,
    ip: new IpRoute2({ runner }),
    ...(options.podNetwork && { podNetwork: { autoMtu: false } }),
    logger: pino({ level: 'silent' }),
  });
  return { runner, host };
}

describe('HostNetworking', () => {
  it('switches IPv6 on once, and tries again next time after a failure (a kernel without IPv6 only logs it)', async () => {
    const { runner, host } = harness();
    runner.once('sysctl', { exitCode: 255, stderr: 'No such file or directory' });
    await host.switchIpv6On();
    await host.switchIpv6On();
    await host.switchIpv6On();
    expect(runner.lines()).toEqual(Array(2).fill('sysctl -q -w net.ipv6.conf.all.disable_ipv6=0'));
  });

  it('without a pod network (a stand-in for the kernel), touches neither kube-bridge nor the forwarding rules', async () => {
    const { runner, host } = harness();
    await host.syncPodNetwork(['10.1.0.0/24'], '10.0.0.1');
    await host.syncPodForwarding(['ipv4'], '10.0.0.1');
    expect(runner.lines()).toEqual([]);
  });

  it('with one, keeps kube-bridge and lets pod traffic through FORWARD', async () => {
    const { runner, host } = harness({ podNetwork: true });
    const uplink = { ifindex: 2, ifname: 'eth0', flags: ['UP'], mtu: 1500, addr_info: [{ family: 'inet', local: '10.0.0.1', prefixlen: 24, scope: 'global' }] };
    const bridge = { ifindex: 7, ifname: 'kube-bridge', flags: ['BROADCAST', 'UP'], mtu: 1500, address: '02:11:22:33:44:55' };
    runner.on('ip -j address show', { stdout: JSON.stringify([uplink]) }).on('ip -j link show', { stdout: JSON.stringify([uplink, bridge]) });
    await host.syncPodNetwork(['10.1.0.0/24'], '10.0.0.1');
    await host.syncPodForwarding(['ipv4'], '10.0.0.1');
    expect(runner.lines().some((line) => line.includes('kube-bridge'))).toBe(true);
    expect(runner.lines().some((line) => line.startsWith('iptables') && line.includes('FORWARD'))).toBe(true);
  });

  it('fills the pod egress sets from every Node that reads, skipping one that does not', async () => {
    const { runner, host } = harness();
    await host.syncPodEgress([meshNode('node-1', '10.0.0.1'), meshNode('node-2', '10.0.0.2'), meshNode('bad', 'nope')], ['ipv4']);
    const restored = runner.invocations.map((i) => i.input ?? '').join('\n');
    expect(restored).toMatch(/10\.1\.0\.0\/24/);
    expect(restored).toMatch(/10\.2\.0\.0\/24/);
    expect(restored).toMatch(/10\.0\.0\.2/);
    expect(restored).not.toMatch(/nope/);
  });
});
