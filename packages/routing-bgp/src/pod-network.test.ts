import { mkdtemp, readFile, rm, stat, symlink, writeFile, chmod, lstat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IpRoute2, RecordingRunner } from '@kube-router/netfilter';
import { KUBE_ROUTER_CNI_CONFLIST } from '@kube-router/testkit';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PodNetwork } from './pod-network.js';

// The paths the real test (pod-network.real.test.ts) cannot easily take: the kernel refusing the bridge's MTU, no
// interface holding the node's address, the bridge plugin creating kube-bridge at the same moment. `ip` is scripted.
const uplink = { ifindex: 2, ifname: 'eth0', flags: ['UP'], mtu: 9000, operstate: 'UP', link_type: 'ether', addr_info: [{ family: 'inet', local: '10.0.0.1', prefixlen: 24, scope: 'global' }] };
const bridge = { ifindex: 7, ifname: 'kube-bridge', flags: ['BROADCAST', 'UP'], mtu: 1500, operstate: 'UP', link_type: 'ether', address: '02:11:22:33:44:55' };
const json = (value: unknown) => ({ stdout: JSON.stringify(value) });
const batch = (line: string) => (spec: { command: string; args?: readonly string[]; input?: string }) =>
  spec.command === 'ip' && (spec.args ?? []).includes('-batch') && (spec.input ?? '').includes(line);

let dir = '';
let file = '';
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'krt-pod-network-'));
  file = join(dir, '10-kuberouter.conflist');
  await writeFile(file, JSON.stringify(KUBE_ROUTER_CNI_CONFLIST));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const podNetwork = (runner: RecordingRunner, cniConfFile: string | undefined = file) =>
  new PodNetwork({ ip: new IpRoute2({ runner }), logger: pino({ level: 'silent' }), autoMtu: true, cniConfFile });
const written = async () => (JSON.parse(await readFile(file, 'utf8')) as { plugins: { mtu?: number; ipam: { ranges?: unknown } }[] }).plugins[0]!;

describe('PodNetwork', () => {
  it("gives the CNI file the bridge's own MTU when the bridge refuses the node's, and says so", async () => {
    const runner = new RecordingRunner()
      .on('ip -j address show', json([uplink]))
      .on('ip -j link show', json([uplink, bridge]))
      .on(batch('mtu 9000'), { exitCode: 2, stderr: 'Error: mtu greater than device maximum.' });
    await expect(podNetwork(runner).sync(['10.244.1.0/24'], '10.0.0.1')).rejects.toThrow('kube-bridge/mtu');
    expect(await written()).toMatchObject({ mtu: 1500, ipam: { ranges: [[{ subnet: '10.244.1.0/24' }]] } });
  });

  it('without the node MTU the file keeps its own, the failure is joined, and the bridge and ranges are still done', async () => {
    const runner = new RecordingRunner().on('ip -j address show', json([])).on('ip -j link show', json([{ ...bridge, flags: ['BROADCAST'] }]));
    await expect(podNetwork(runner).sync(['10.244.1.0/24', 'fd00:1::/64'], '10.0.0.1')).rejects.toThrow("auto-mtu: no interface holds the node's address 10.0.0.1");
    expect(await written()).not.toHaveProperty('mtu');
    expect((await written()).ipam.ranges).toEqual([[{ subnet: '10.244.1.0/24' }], [{ subnet: 'fd00:1::/64' }]]);
    expect(runner.invocations.map((call) => call.input?.trim()).filter(Boolean)).toEqual([
      `link set dev kube-bridge address ${bridge.address}`,
      'link set dev kube-bridge up',
    ]);
  });

  it('takes a kube-bridge the bridge plugin made meanwhile (ip link add: File exists), and pins a bridge made anew', async () => {
    let links: object[] = [uplink];
    const runner = new RecordingRunner()
      .on('ip -j address show', json([uplink]))
      .on('ip -j link show', () => json(links))
      .on(batch('link add'), () => {
        links = [uplink, { ...bridge, mtu: 9000 }];
        return { exitCode: 2, stderr: 'RTNETLINK answers: File exists' };
      });
    const network = podNetwork(runner);
    await network.sync([], '10.0.0.1');
    await network.sync([], '10.0.0.1');
    const pins = () => runner.invocations.filter((call) => call.input?.includes('address')).length;
    expect(pins()).toBe(1);
    links = [uplink, { ...bridge, ifindex: 8, mtu: 9000 }];
    await network.sync([], '10.0.0.1');
    expect(pins()).toBe(2);
  });

  it('keeps a symbolic link a link and the file its mode when it writes', async () => {
    const real = join(dir, 'real.conflist');
    await writeFile(real, JSON.stringify(KUBE_ROUTER_CNI_CONFLIST));
    await chmod(real, 0o600);
    const link = join(dir, 'link.conflist');
    await symlink(real, link);
    const runner = new RecordingRunner().on('ip -j address show', json([uplink])).on('ip -j link show', json([uplink, { ...bridge, mtu: 9000 }]));
    await podNetwork(runner, link).sync(['10.244.1.0/24'], '10.0.0.1');
    expect((await lstat(link)).isSymbolicLink()).toBe(true);
    expect((await stat(real)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(real, 'utf8')).plugins[0].mtu).toBe(9000);
  });
});
