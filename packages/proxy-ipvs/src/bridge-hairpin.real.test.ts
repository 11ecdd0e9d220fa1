import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { addNetns, deleteNetns, ExecRunner, hasTool } from '@kube-router/netfilter';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BridgeHairpin } from './bridge-hairpin.js';
import { ANNOTATIONS, POD_BRIDGE } from './names.js';
import { controllerHarness } from './testing/controller-harness.js';

// Bridges, veths and the neighbour and FDB tables need no IPVS, so this runs on the host: a node namespace holding
// kube-bridge and two pod namespaces attached to it by veths, as the CNI bridge plugin attaches pods. The controller's
// IPVS, dummy-interface and `-m ipvs` steps fail on a host without IPVS; those failures are joined beside what is
// checked here, which is only the bridge-hairpin step.
const missing = process.getuid?.() !== 0 ? 'needs root' : ['ip', 'bridge', 'iptables', 'node'].find((tool) => !hasTool(tool));

const NODE = 'node-a';
const script = (name: string) => fileURLToPath(new URL(`./testing/${name}`, import.meta.url));

function service(name: string, clusterIP: string, annotations: Record<string, string> = {}): V1Service {
  return { metadata: { namespace: 'ns', name, annotations }, spec: { clusterIP, ports: [{ name: 'http', protocol: 'TCP', port: 80 }] } };
}

function slice(serviceName: string, endpoints: { ip: string; node?: string }[]): V1EndpointSlice {
  return {
    metadata: { namespace: 'ns', name: `${serviceName}-1`, labels: { 'kubernetes.io/service-name': serviceName } },
    addressType: 'IPv4',
    ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
    endpoints: endpoints.map(({ ip, node }) => ({ addresses: [ip], nodeName: node ?? NODE, conditions: { ready: true } })),
  };
}

describe.skipIf(missing !== undefined)(`hairpin_mode on kube-bridge ports in network namespaces${missing ? ` (skipped: ${missing})` : ''}`, () => {
  const runner = new ExecRunner({ defaultTimeoutMs: 10_000 });
  const prefix = `krh-${randomBytes(3).toString('hex')}`;
  const node = `${prefix}-node`;
  const pods = [
    { netns: `${prefix}-p1`, port: 'veth-p1', ip: '10.244.0.2' },
    { netns: `${prefix}-p2`, port: 'veth-p2', ip: '10.244.0.3' },
  ] as const;
  const [pod1, pod2] = pods;
  const servers: ChildProcess[] = [];
  const sh = (netns: string, command: string) => runner.run({ command: 'sh', args: ['-ec', command], netns });
  const hairpinOf = async (port: string) => (await sh(node, `cat /sys/class/net/${port}/brport/hairpin_mode`)).stdout.trim();
  const neighbours = async () => (await sh(node, `ip -j neigh show dev ${POD_BRIDGE}`)).stdout;
  /** Forgets what the node learned about the pods, so that each sync has to ask the kernel to find them again. */
  const forget = async () => {
    await sh(node, `ip neigh flush dev ${POD_BRIDGE}; for p in ${pods.map((pod) => pod.port).join(' ')}; do ip link set dev $p type bridge_slave hairpin off; done`);
    for (const pod of pods) {
      const fdb = JSON.parse((await sh(node, `bridge -j fdb show br ${POD_BRIDGE} brport ${pod.port}`)).stdout || '[]') as { mac: string; state?: string; flags?: string[] }[];
      for (const entry of fdb) {
        if (entry.state !== 'permanent' && !entry.flags?.includes('self')) await sh(node, `bridge fdb del ${entry.mac} dev ${pod.port} master`);
      }
    }
  };
  const hairpinFailures = (failed: string[]) => failed.filter((object) => object.startsWith('bridge-hairpin'));

  beforeAll(async () => {
    for (const netns of [node, ...pods.map((pod) => pod.netns)]) await addNetns(runner, netns);
    await sh(
      node,
      `ip link set lo up
       ip link add ${POD_BRIDGE} type bridge
       ip addr add 10.244.0.1/24 dev ${POD_BRIDGE}
       ip link set ${POD_BRIDGE} up
       sysctl -qw net.ipv4.ip_forward=1
       # As on a kube-router node (its firewall sets it): bridged traffic goes through iptables.
       sysctl -qw net.bridge.bridge-nf-call-iptables=1`,
    );
    for (const pod of pods) {
      // IPv6 off in the pod: no DAD or MLD frame teaches the bridge the pod's MAC before the test wants it to.
      await sh(pod.netns, 'ip link set lo up; sysctl -qw net.ipv6.conf.default.disable_ipv6=1 net.ipv6.conf.all.disable_ipv6=1');
      await sh(node, `ip link add ${pod.port} type veth peer name eth0 netns ${pod.netns}; ip link set ${pod.port} master ${POD_BRIDGE} up`);
      await sh(pod.netns, `ip addr add ${pod.ip}/24 dev eth0; ip link set eth0 up; ip route add default via 10.244.0.1`);
      const server = spawn('ip', ['netns', 'exec', pod.netns, process.execPath, script('echo.mjs'), pod.netns, '8080'], { stdio: ['ignore', 'pipe', 'inherit'] });
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.stdout?.once('data', () => resolve());
        server.once('exit', (code) => reject(new Error(`echo server in ${pod.netns} exited with ${code}`)));
      });
    }
  });

  afterAll(async () => {
    for (const server of servers) server.kill();
    for (const netns of [...pods.map((pod) => pod.netns), node]) await deleteNetns(runner, netns).catch(() => {});
  });

  beforeEach(forget);

  it("turns hairpin_mode on for the port of a hairpin Service's local endpoint and leaves the other pod's off", async () => {
    expect((await neighbours()).trim()).toBe('[]');
    const proxy = controllerHarness(
      runner,
      {
        services: [service('hairpin', '10.96.0.50', { [ANNOTATIONS.hairpin]: '' }), service('plain', '10.96.0.51')],
        slices: [
          // Another node's endpoint and a host-network one (not on the bridge) are no business of this node's bridge.
          slice('hairpin', [{ ip: pod1.ip }, { ip: '10.244.1.9', node: 'node-b' }, { ip: '192.168.50.5' }]),
          slice('plain', [{ ip: pod2.ip }]),
        ],
      },
      { netns: node, enableIpv6: false },
    );
    expect(hairpinFailures(await proxy.sync())).toEqual([]);
    expect(await hairpinOf(pod1.port)).toBe('1');
    expect(await hairpinOf(pod2.port)).toBe('0');
    // The kernel was asked to resolve the pod (a managed neighbour), and the entry is an ordinary one again after.
    const entries = JSON.parse(await neighbours()) as { dst: string; managed?: unknown }[];
    expect(entries.find((entry) => entry.dst === pod1.ip)).toBeDefined();
    expect(entries.filter((entry) => entry.managed !== undefined)).toEqual([]);
    expect(entries.find((entry) => entry.dst === pod2.ip)).toBeUndefined();
  });

  it('with --hairpin-mode turns it on for every Service’s local endpoints', async () => {
    const proxy = controllerHarness(
      runner,
      { services: [service('one', '10.96.0.60'), service('two', '10.96.0.61')], slices: [slice('one', [{ ip: pod1.ip }]), slice('two', [{ ip: pod2.ip }])] },
      { netns: node, enableIpv6: false, hairpinMode: true },
    );
    expect(hairpinFailures(await proxy.sync())).toEqual([]);
    expect([await hairpinOf(pod1.port), await hairpinOf(pod2.port)]).toEqual(['1', '1']);
  });

  it('finds the port of a pod whose MAC the bridge has forgotten (FDB aged out) while the node still knows it', async () => {
    // The node knows the pod (a neighbour entry with its MAC), but the bridge has no FDB entry for it any more.
    const mac = (await sh(pod1.netns, 'cat /sys/class/net/eth0/address')).stdout.trim();
    await sh(node, `ip neigh replace ${pod1.ip} dev ${POD_BRIDGE} lladdr ${mac} nud stale; bridge fdb del ${mac} dev ${pod1.port} master 2>/dev/null || true`);
    const report = await new BridgeHairpin({ runner, netns: node, timeoutMs: 10_000 }).ensure([pod1.ip]);
    expect(report.failures).toEqual(new Map());
    expect(report.ports).toEqual(new Map([[pod1.ip, pod1.port]]));
    expect(await hairpinOf(pod1.port)).toBe('1');
  });

  it('does nothing on a node without the bridge', async () => {
    const report = await new BridgeHairpin({ runner, netns: node, timeoutMs: 10_000, bridge: 'kube-nobridge' }).ensure([pod1.ip]);
    expect(report).toMatchObject({ bridgePresent: false, enabled: [] });
    expect(report.failures.size).toBe(0);
  });

  it('lets a pod reach itself through its Service address once the sync turned hairpin on', async () => {
    // STAND-IN FOR IPVS: this host has no IPVS, so a DNAT rule in the node namespace plays the virtual server
    // (10.96.0.70:80 -> pod1:8080), with kube-router's hairpin SNAT to the VIP beside it. Only the bridge part is
    // under test: with bridge-nf-call-iptables the DNATed frame is bridged back out of the port it came in by,
    // which the bridge refuses unless that port has hairpin_mode.
    await sh(
      node,
      `iptables -t nat -A PREROUTING -d 10.96.0.70/32 -p tcp --dport 80 -j DNAT --to-destination ${pod1.ip}:8080
       iptables -t nat -A POSTROUTING -s ${pod1.ip}/32 -d ${pod1.ip}/32 -p tcp --dport 8080 -j SNAT --to-source 10.96.0.70`,
    );
    const probe = async () => JSON.parse((await runner.run({ command: process.execPath, args: [script('probe.mjs'), '10.96.0.70', '80', '1'], netns: pod1.netns })).stdout) as string[];
    expect(await probe()).toEqual(['error: timeout']);

    const proxy = controllerHarness(
      runner,
      { services: [service('self', '10.96.0.70', { [ANNOTATIONS.hairpin]: '' })], slices: [slice('self', [{ ip: pod1.ip }])] },
      { netns: node, enableIpv6: false },
    );
    expect(hairpinFailures(await proxy.sync())).toEqual([]);
    expect(await hairpinOf(pod1.port)).toBe('1');
    expect(await probe()).toEqual([`${pod1.netns} 10.96.0.70`]);
  });
});
