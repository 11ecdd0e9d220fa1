import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExecRunner, IpRoute2 } from '@kube-router/netfilter';
import { cniAdd, cniDel, DEFAULT_CNI_PATH, KUBE_ROUTER_CNI_CONFLIST, KUBE_ROUTER_CNI_CONF_NAME, labSkipReason } from '@kube-router/testkit';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PodForwarding } from './pod-forwarding.js';
import { KUBE_BRIDGE, PodNetwork } from './pod-network.js';
import { tcpConnect, tcpListener } from './testing/mesh.js';

const cniPlugins = ['bridge', 'host-local'].filter((plugin) => !existsSync(join(DEFAULT_CNI_PATH, plugin)));
const skipReason = labSkipReason() ?? (cniPlugins.length > 0 ? `missing CNI plugins in ${DEFAULT_CNI_PATH}: ${cniPlugins.join(', ')}` : undefined);

const NODE = 'tbgp-cni-node';
const PODS = ['tbgp-cni-pod1', 'tbgp-cni-pod2'];
/** The pod that is refused: a failed ADD leaves its veth behind, so its sandbox goes as a kubelet's would. */
const REFUSED_POD = 'tbgp-cni-pod0';
const NODE_ADDRESS = '10.99.0.1';
const NODE_MTU = 1400;
const POD_CIDRS = ['10.244.7.0/24', 'fd00:10:244:7::/64'];

const ip = (...args: string[]) => execFileSync('ip', args, { encoding: 'utf8' });
function deleteNamespaces(): void {
  for (const netns of [REFUSED_POD, ...PODS, NODE]) {
    try {
      execFileSync('ip', ['netns', 'del', netns], { stdio: 'ignore' });
    } catch {
      // not there
    }
  }
}
const addressIn = (netns: string) =>
  (JSON.parse(ip('-n', netns, '-j', '-4', 'address', 'show', 'dev', 'eth0')) as { addr_info: { local: string }[] }[])[0]!.addr_info[0]!.local;
const linkOf = (netns: string, name: string) => JSON.parse(ip('-n', netns, '-j', 'link', 'show', 'dev', name))[0] as { mtu: number; address: string; flags: string[] };

// What --enable-cni and --auto-mtu are for: kube-router's own CNI file, as its install-cni init container leaves it,
// gives no pod an address until the agent has written the node's pod CIDRs into it. The real bridge and host-local
// plugins, run as a kubelet runs them, then attach pods on kube-bridge with addresses from those ranges.
describe.skipIf(skipReason)(`kube-bridge and the CNI file, with the real CNI plugins${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  let dir = '';
  let confPath = '';
  let podNetwork: PodNetwork;
  let podAddresses: string[] = [];
  let stopListener: (() => void) | undefined;
  const config = () => readFile(confPath, 'utf8').then((text) => JSON.parse(text) as typeof KUBE_ROUTER_CNI_CONFLIST);
  const invocation = async (pod: string) => ({ config: await config(), nodeNetns: NODE, podNetns: pod, containerId: pod });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tbgp-cni-'));
    confPath = join(dir, KUBE_ROUTER_CNI_CONF_NAME);
    // host-local keeps its leases under dataDir: a key the agent does not know, so it must survive the edit.
    const conflist = structuredClone(KUBE_ROUTER_CNI_CONFLIST) as unknown as { plugins: { ipam: Record<string, unknown> }[] };
    conflist.plugins[0]!.ipam.dataDir = join(dir, 'leases');
    await writeFile(confPath, JSON.stringify(conflist));
    deleteNamespaces(); // left by a run that was killed
    for (const netns of [NODE, REFUSED_POD, ...PODS]) ip('netns', 'add', netns);
    // The node's uplink holds its address and sets its MTU, as a cloud VM's interface would.
    ip('-n', NODE, 'link', 'add', 'uplink', 'mtu', String(NODE_MTU), 'type', 'veth', 'peer', 'name', 'uplink-peer', 'mtu', String(NODE_MTU));
    ip('-n', NODE, 'addr', 'add', `${NODE_ADDRESS}/24`, 'dev', 'uplink');
    ip('-n', NODE, 'link', 'set', 'uplink', 'up');
    ip('-n', NODE, 'link', 'set', 'uplink-peer', 'up');
    const runner = new ExecRunner({ logger: pino({ level: 'silent' }) });
    podNetwork = new PodNetwork({ ip: new IpRoute2({ runner, netns: NODE }), logger: pino({ level: 'silent' }), cniConfFile: confPath, autoMtu: true });
  }, 30_000);

  afterAll(async () => {
    stopListener?.();
    deleteNamespaces();
    if (dir) await rm(dir, { recursive: true, force: true });
  }, 30_000);

  it('before the agent writes the file, host-local refuses every pod: no IP ranges specified', async () => {
    await expect(cniAdd(await invocation(REFUSED_POD))).rejects.toThrow('no IP ranges specified');
    ip('netns', 'del', REFUSED_POD);
  });

  it('after one sync, pods get addresses from the pod CIDRs, on kube-bridge, with the node MTU', async () => {
    // The refused pod's veth made the bridge take its MAC; with the pod gone the bridge has none, which the bridge
    // plugin cannot set back: every pod after it would fail until the agent gives the bridge an address of its own.
    expect(linkOf(NODE, KUBE_BRIDGE).address).toBe('00:00:00:00:00:00');
    await podNetwork.sync(POD_CIDRS, NODE_ADDRESS);
    expect(linkOf(NODE, KUBE_BRIDGE).address).not.toBe('00:00:00:00:00:00');
    expect(linkOf(NODE, KUBE_BRIDGE)).toMatchObject({ mtu: NODE_MTU, flags: expect.arrayContaining(['UP']) });
    const written = await config();
    expect(written.plugins[0]).toMatchObject({ hairpinMode: true, isDefaultGateway: true, mtu: NODE_MTU, ipam: { dataDir: join(dir, 'leases') } });

    for (const pod of PODS) {
      const { addresses } = await cniAdd(await invocation(pod));
      expect(addresses).toHaveLength(2);
      expect(addresses[0]).toMatch(/^10\.244\.7\.\d+\/24$/);
      expect(addresses[1]).toMatch(/^fd00:10:244:7::[0-9a-f]+\/64$/);
      expect(linkOf(pod, 'eth0').mtu).toBe(NODE_MTU);
    }
    // Both pods' host ends hang on kube-bridge.
    const ports = JSON.parse(ip('-n', NODE, '-j', 'link', 'show', 'master', KUBE_BRIDGE)) as { ifname: string }[];
    expect(ports).toHaveLength(2);
    podAddresses = await Promise.all(PODS.map(async (pod) => addressIn(pod)));
  });

  it('lets pod traffic through a FORWARD chain that drops, and hands bridged traffic to iptables (br_netfilter)', async () => {
    const iptables = (...args: string[]) => execFileSync('ip', ['netns', 'exec', NODE, 'iptables', '--wait', ...args], { encoding: 'utf8' });
    const sysctl = (value: number) => execFileSync('ip', ['netns', 'exec', NODE, 'sysctl', '-qw', `net.bridge.bridge-nf-call-iptables=${value}`]);
    const runner = new ExecRunner({ logger: pino({ level: 'silent' }) });
    const forwarding = new PodForwarding({ runner, ip: new IpRoute2({ runner, netns: NODE }), netns: NODE });
    stopListener = await tcpListener(PODS[1]!, 8080);
    // As Docker leaves a node: FORWARD drops what no rule accepts, and bridged frames go through it.
    iptables('-P', 'FORWARD', 'DROP');
    sysctl(1);
    expect(await tcpConnect(PODS[0]!, podAddresses[1]!, 8080, 500)).toBe('timeout');
    await forwarding.ensure(['ipv4'], NODE_ADDRESS);
    expect(await tcpConnect(PODS[0]!, podAddresses[1]!, 8080)).toBe('open');
    const rules = () => iptables('-S', 'FORWARD').split('\n').filter((line) => line.startsWith('-A FORWARD'));
    expect(rules()).toEqual([
      '-A FORWARD -i kube-bridge -m comment --comment "allow outbound traffic from pods" -j ACCEPT',
      '-A FORWARD -o kube-bridge -m comment --comment "allow inbound traffic to pods" -j ACCEPT',
      '-A FORWARD -o uplink -m comment --comment "allow outbound node port traffic on node interface with which node ip is associated" -j ACCEPT',
    ]);

    // A policy's DROP stays ahead of them (rule 1, where the netpol controller keeps its jump) and is obeyed; with
    // bridge-nf-call-iptables off, the same DROP would never see traffic between pods on kube-bridge.
    iptables('-I', 'FORWARD', '1', '-d', podAddresses[1]!, '-j', 'DROP');
    sysctl(0);
    expect(await tcpConnect(PODS[0]!, podAddresses[1]!, 8080)).toBe('open');
    await forwarding.ensure(['ipv4'], NODE_ADDRESS);
    expect(await tcpConnect(PODS[0]!, podAddresses[1]!, 8080, 500)).toBe('timeout');
    expect(rules()).toHaveLength(4);
    iptables('-D', 'FORWARD', '-d', podAddresses[1]!, '-j', 'DROP');
    for (const pod of PODS) await cniDel(await invocation(pod));
  });

  it('a sync with nothing to change leaves the file alone; a new pod CIDR is added, the old one kept', async () => {
    const before = await stat(confPath);
    await podNetwork.sync(POD_CIDRS, NODE_ADDRESS);
    expect((await stat(confPath)).ino).toBe(before.ino);
    await podNetwork.sync([...POD_CIDRS, '10.244.8.0/24'], NODE_ADDRESS);
    expect((await config()).plugins[0]!.ipam).toMatchObject({ ranges: [[{ subnet: POD_CIDRS[0] }], [{ subnet: POD_CIDRS[1] }], [{ subnet: '10.244.8.0/24' }]] });
    expect((await stat(confPath)).ino).not.toBe(before.ino);
  });

  it('a file it cannot read fails the step naming the file, leaves it as it was, and still keeps kube-bridge', async () => {
    const broken = '{"plugins": [';
    await writeFile(confPath, broken);
    ip('-n', NODE, 'link', 'del', KUBE_BRIDGE);
    await expect(podNetwork.sync(POD_CIDRS, NODE_ADDRESS)).rejects.toThrow(`cni-conf: ${confPath} is not JSON`);
    expect(await readFile(confPath, 'utf8')).toBe(broken);
    expect(linkOf(NODE, KUBE_BRIDGE).mtu).toBe(NODE_MTU);
    await rm(confPath);
    await expect(podNetwork.sync(POD_CIDRS, NODE_ADDRESS)).rejects.toThrow(`CNI conf file ${confPath} does not exist`);
  });
});
