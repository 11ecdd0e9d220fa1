import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { ExecRunner } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';

const script = (name: string) => fileURLToPath(new URL(`./${name}`, import.meta.url));

export const POD_CIDRS = { ipv4: '10.244.0.0/24', ipv6: 'fd00:244::/64' } as const;
/** The node's addresses on the link to the outside clients: its InternalIPs, where NodePorts answer. */
export const NODE_IPS = { ipv4: '192.168.77.1', ipv6: 'fd00:77::1' } as const;
/** Two outside clients' addresses on that link: one inside the LoadBalancer's source ranges, one outside. */
export const EXTERNAL_IPS = { ipv4: ['192.168.77.2', '192.168.77.3'], ipv6: ['fd00:77::2', 'fd00:77::3'] } as const;

export interface Pod {
  readonly name: string;
  readonly netns: string;
  readonly ipv4: string;
  readonly ipv6: string;
}

export interface ProbeResult {
  readonly ok: boolean;
  readonly reply?: string;
  readonly error?: string;
  readonly ms: number;
}

export interface ProbeRequest {
  readonly host: string;
  readonly port: number;
  readonly count?: number;
  readonly protocol?: 'tcp' | 'udp';
  readonly timeoutMs?: number;
  readonly source?: string;
  readonly sourcePort?: number;
}

/**
 * A node on the host kernel, in network namespaces named `krt-tpn<run>-*`: the node's namespace (where the proxy's
 * tables go) with the pod bridge `kube-bridge`, pod namespaces on it (dual-stack, echo servers answering
 * "<pod> <client address>"), and an outside namespace on a routed link with two client addresses per family.
 */
export class NftProxyWorld {
  readonly run = randomBytes(3).toString('hex');
  readonly node = `krt-tpn${this.run}-node`;
  readonly outside = `krt-tpn${this.run}-ext`;
  readonly pods: Pod[] = [];
  readonly runner: CommandRunner = new ExecRunner({ defaultTimeoutMs: 30_000 });
  readonly #servers: ChildProcess[] = [];
  readonly #namespaces: string[] = [];

  async sh(command: string, netns?: string): Promise<string> {
    const result = await this.runner.run({ command: 'sh', args: ['-c', command], ...(netns && { netns }) });
    return result.stdout;
  }

  async setUp(): Promise<void> {
    for (const netns of [this.node, this.outside]) {
      await this.sh(`ip netns add ${netns}`);
      this.#namespaces.push(netns);
    }
    await this.sh(
      `set -e
      ip link set lo up
      sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
      ip link add kube-bridge type bridge
      ip addr add 10.244.0.1/24 dev kube-bridge
      ip addr add fd00:244::1/64 dev kube-bridge nodad
      ip link set kube-bridge up
      ip link add uplink type veth peer name eth0 netns ${this.outside}
      ip addr add ${NODE_IPS.ipv4}/24 dev uplink
      ip addr add ${NODE_IPS.ipv6}/64 dev uplink nodad
      ip link set uplink up
      ip route add default via ${EXTERNAL_IPS.ipv4[0]}
      ip -6 route add default via ${EXTERNAL_IPS.ipv6[0]}`,
      this.node,
    );
    await this.sh(
      `set -e
      ip link set lo up && ip link set eth0 up
      ${[...EXTERNAL_IPS.ipv4.map((ip) => `ip addr add ${ip}/24 dev eth0`), ...EXTERNAL_IPS.ipv6.map((ip) => `ip addr add ${ip}/64 dev eth0 nodad`)].join('\n')}
      ip route add default via ${NODE_IPS.ipv4}
      ip -6 route add default via ${NODE_IPS.ipv6}`,
      this.outside,
    );
  }

  /**
   * A pod on kube-bridge, its port in hairpin mode as kube-router's CNI configuration (`hairpinMode: true`) makes it:
   * with br_netfilter a pod's packet to itself through a Service leaves by the port it came in. With `serve`, an echo
   * server answering TCP and UDP on those ports.
   */
  async addPod(name: string, serve: readonly number[] = []): Promise<Pod> {
    const index = this.pods.length + 2;
    const pod: Pod = { name, netns: `krt-tpn${this.run}-${name}`, ipv4: `10.244.0.${index}`, ipv6: `fd00:244::${index}` };
    await this.sh(`ip netns add ${pod.netns}`);
    this.#namespaces.push(pod.netns);
    await this.sh(
      `set -e
      ip link add veth-${name} type veth peer name eth0 netns ${pod.netns}
      ip link set veth-${name} master kube-bridge up
      ip link set veth-${name} type bridge_slave hairpin on`,
      this.node,
    );
    await this.sh(
      `set -e
      ip link set lo up && ip link set eth0 up
      ip addr add ${pod.ipv4}/24 dev eth0
      ip addr add ${pod.ipv6}/64 dev eth0 nodad
      ip route add default via 10.244.0.1
      ip -6 route add default via fd00:244::1`,
      pod.netns,
    );
    this.pods.push(pod);
    if (serve.length > 0) await this.#serve(pod, serve);
    return pod;
  }

  async #serve(pod: Pod, ports: readonly number[]): Promise<void> {
    const child = spawn('ip', ['netns', 'exec', pod.netns, process.execPath, script('echo.mjs'), pod.name, ...ports.map(String)], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#servers.push(child);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`echo server in ${pod.netns} did not start`)), 10_000);
      child.stdout?.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('listening')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`echo server in ${pod.netns} exited with ${code}`));
      });
    });
  }

  /** Probes from a namespace; each result's reply is "<pod> <client address as the pod saw it>". */
  async probe(fromNetns: string, request: ProbeRequest): Promise<ProbeResult[]> {
    const wire = { count: 1, protocol: 'tcp', timeoutMs: 2_000, ...request };
    const { stdout } = await this.runner.run({ command: process.execPath, args: [script('probe.mjs'), JSON.stringify(wire)], netns: fromNetns, timeoutMs: 60_000 });
    return JSON.parse(stdout) as ProbeResult[];
  }

  async tearDown(): Promise<void> {
    for (const server of this.#servers.splice(0)) server.kill('SIGKILL');
    for (const netns of this.#namespaces.splice(0).reverse()) await this.sh(`ip netns del ${netns}`).catch(() => undefined);
  }
}
