import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { HealthRegistry } from '@kube-router/healthcheck';
import type { KubeContext } from '@kube-router/kube';
import type { AgentMetrics } from '@kube-router/metrics';
import type { CommandRunner } from '@kube-router/netfilter';
import { startApiServer } from '@kube-router/testkit';
import type { ApiServer, KubeObjectInput } from '@kube-router/testkit';
import type { BackgroundProcess, TestKernel } from '@kube-router/testkit/qemu';
import type { ProxyController } from '../controller.js';
import type { ProxyIpvsOptions } from '../options.js';
import { captureLogs } from '@kube-router/testkit';
import type { LogLine } from '@kube-router/testkit';
import { assembleProxy, NODE_NAME } from './assembly.js';

export { NODE_NAME };
/** The node's address on the link to the outside client: its InternalIP, where NodePorts answer. */
export const NODE_IP = '192.168.77.1';
export const EXTERNAL_CLIENT_IP = '192.168.77.2';
export const POD_CIDR = '10.244.0.0/24';

export interface Pod {
  readonly name: string;
  readonly netns: string;
  readonly ip: string;
}

const script = (name: string) => readFileSync(fileURLToPath(new URL(`./${name}`, import.meta.url)), 'utf8');

/**
 * A node made of the kernel's root namespace (the node, where IPVS runs), pod namespaces behind veth pairs routed
 * /32 by /32 with 169.254.1.1 as every pod's gateway on the node's end (answering ARP even with arp_ignore=1), and an outside client on its own link. Every name has the
 * `tipvs` prefix. In the QEMU guest the whole kernel is the test's; on an IPVS host the root namespace is a netns.
 */
export class ProxyWorld {
  readonly pods: Pod[] = [];
  readonly #servers: BackgroundProcess[] = [];
  readonly kernel: TestKernel;
  readonly netns: string | undefined;
  #index = 0;

  constructor(kernel: TestKernel) {
    this.kernel = kernel;
    // On a host the "node" must not be the host itself: it gets its own namespace.
    this.netns = kernel.where === 'host' ? 'tipvs-node' : undefined;
  }

  private sh(script: string): Promise<unknown> {
    return this.kernel.sh(script, this.netns ? { netns: this.netns } : {});
  }

  async setUp(): Promise<void> {
    if (this.netns) await this.kernel.sh(`ip netns add ${this.netns}`);
    await this.kernel.writeFile('/tmp/tipvs/echo.mjs', script('echo.mjs'));
    await this.kernel.writeFile('/tmp/tipvs/probe.mjs', script('probe.mjs'));
    await this.kernel.writeFile('/tmp/tipvs/probe-udp.mjs', script('probe-udp.mjs'));
    await this.kernel.writeFile('/tmp/tipvs/stream.mjs', script('stream.mjs'));
    await this.kernel.writeFile('/tmp/tipvs/prober.mjs', script('prober.mjs'));
    await this.kernel.writeFile('/tmp/tipvs/udp-stream.mjs', script('udp-stream.mjs'));
    await this.sh(`set -e
      ip link set lo up
      sysctl -qw net.ipv4.ip_forward=1
      ip netns add tipvs-ext
      ip link add tipvs-ext0 type veth peer name eth0 netns tipvs-ext
      ip addr add ${NODE_IP}/24 dev tipvs-ext0 && ip link set tipvs-ext0 up
      ip -n tipvs-ext link set lo up && ip -n tipvs-ext link set eth0 up
      ip -n tipvs-ext addr add ${EXTERNAL_CLIENT_IP}/24 dev eth0
      ip -n tipvs-ext route add default via ${NODE_IP}`);
  }

  /** A pod namespace with a routed veth; with `serve`, an echo server answering on those ports. */
  async addPod(name: string, serve: number[] = []): Promise<Pod> {
    const index = ++this.#index;
    const pod = { name, netns: `tipvs-${name}`, ip: `10.244.0.${index + 1}` };
    const host = `tipvs-v${index}`;
    await this.sh(`set -e
      ip netns add ${pod.netns}
      ip link add ${host} type veth peer name eth0 netns ${pod.netns}
      ip addr add 169.254.1.1/32 dev ${host}
      ip link set ${host} up
      ip route add ${pod.ip}/32 dev ${host}
      ip -n ${pod.netns} link set lo up && ip -n ${pod.netns} link set eth0 up
      ip -n ${pod.netns} addr add ${pod.ip}/32 dev eth0
      ip -n ${pod.netns} route add 169.254.1.1 dev eth0
      ip -n ${pod.netns} route add default via 169.254.1.1 dev eth0`);
    this.pods.push(pod);
    if (serve.length > 0) {
      const server = await this.kernel.spawn({ command: 'node', args: ['/tmp/tipvs/echo.mjs', name, ...serve.map(String)], netns: pod.netns });
      this.#servers.push(server);
      for (let i = 0; i < 200; i++) {
        if ((await server.output()).stdout.includes('listening')) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    return pod;
  }

  /** Connects `count` times from a namespace; each answer is "<pod> <client address as the pod saw it>". */
  async probe(fromNetns: string, ip: string, port: number, count: number, protocol: 'tcp' | 'udp' = 'tcp'): Promise<string[]> {
    const probeScript = protocol === 'udp' ? '/tmp/tipvs/probe-udp.mjs' : '/tmp/tipvs/probe.mjs';
    const { stdout } = await this.kernel.runner.run({ command: 'node', args: [probeScript, ip, String(port), String(count)], netns: fromNetns, timeoutMs: 60_000 });
    return JSON.parse(stdout) as string[];
  }

  /** Opens connections and keeps them open in the background (for graceful termination). */
  holdConnections(fromNetns: string, ip: string, port: number, count: number, holdMs: number): Promise<BackgroundProcess> {
    return this.kernel.spawn({ command: 'node', args: ['/tmp/tipvs/probe.mjs', ip, String(port), String(count), String(holdMs)], netns: fromNetns });
  }

  /** One long-lived connection exchanging a line every `intervalMs` (stream.mjs; parse its output with parseStream). */
  stream(fromNetns: string, ip: string, port: number, intervalMs: number): Promise<BackgroundProcess> {
    return this.kernel.spawn({ command: 'node', args: ['/tmp/tipvs/stream.mjs', ip, String(port), String(intervalMs)], netns: fromNetns });
  }

  /** One UDP flow (one source port) sending a datagram every `intervalMs` (udp-stream.mjs: `answer <t> <pod> <client>` lines). */
  udpStream(fromNetns: string, ip: string, port: number, intervalMs: number): Promise<BackgroundProcess> {
    return this.kernel.spawn({ command: 'node', args: ['/tmp/tipvs/udp-stream.mjs', ip, String(port), String(intervalMs)], netns: fromNetns });
  }

  /** A new connection every `intervalMs` (prober.mjs; parse its output with parseProbes). */
  prober(fromNetns: string, ip: string, port: number, intervalMs: number, timeoutMs: number): Promise<BackgroundProcess> {
    return this.kernel.spawn({ command: 'node', args: ['/tmp/tipvs/prober.mjs', ip, String(port), String(intervalMs), String(timeoutMs)], netns: fromNetns });
  }

  /**
   * The kernel's uptime in ms, the clock stream.mjs and prober.mjs stamp their lines with: read after an event of the
   * test process, it marks that event on their timeline, late by at most `rttMs`.
   */
  async uptime(): Promise<{ ms: number; rttMs: number }> {
    const asked = performance.now();
    const { stdout } = await this.kernel.sh('cat /proc/uptime');
    return { ms: Math.round(Number(stdout.split(' ')[0]) * 1000), rttMs: Math.round(performance.now() - asked) };
  }

  async tearDown(): Promise<void> {
    for (const server of this.#servers.splice(0)) await server.stop().catch(() => undefined);
    const namespaces = ['tipvs-ext', ...this.pods.map((pod) => pod.netns)];
    await this.kernel.sh(namespaces.map((ns) => `ip netns del ${ns} 2>/dev/null`).join('; ') + '; true').catch(() => undefined);
    if (this.netns) await this.kernel.sh(`ip netns del ${this.netns}`).catch(() => undefined);
  }
}

export interface ProxyHarness {
  readonly server: ApiServer;
  readonly kube: KubeContext;
  readonly controller: ProxyController;
  readonly metrics: AgentMetrics;
  readonly health: HealthRegistry;
  /** The agent's log lines, warnings and above (all of TIPVS_LOG's level, echoed, when it is set). */
  readonly logs: LogLine[];
  close(): Promise<void>;
}

/** The plugin against the embedded API server, programming the kernel through `runner`. */
export async function startProxy(runner: CommandRunner, options: ProxyIpvsOptions, seed: KubeObjectInput[] = []): Promise<ProxyHarness> {
  const server = await startApiServer({ port: 0 });
  for (const object of seed) server.create(object);
  const kubeconfig = await server.writeKubeconfig();
  const { logger, lines: logs } = captureLogs((process.env.TIPVS_LOG as 'debug' | 'info' | undefined) ?? 'warn', { echo: process.env.TIPVS_LOG !== undefined });
  const { kube, controller, metrics, health } = await assembleProxy({ kubeconfig, runner, options, logger });
  await controller.start({ requestSync: () => undefined, signal: new AbortController().signal });
  await kube.informers.start({ cacheSyncTimeoutMs: 10_000 });
  return {
    server,
    kube,
    controller,
    metrics,
    health,
    logs,
    async close() {
      await controller.stop();
      await kube.informers.stop();
      await server.close();
    },
  };
}

export function nodeObject(): KubeObjectInput {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: NODE_NAME },
    spec: { podCIDR: POD_CIDR, podCIDRs: [POD_CIDR] },
    status: { addresses: [{ type: 'InternalIP', address: NODE_IP }] },
  };
}

export interface ServiceSpecInput {
  readonly name: string;
  readonly clusterIP: string;
  readonly port?: number;
  readonly targetPort?: number;
  readonly protocol?: 'TCP' | 'UDP';
  readonly type?: 'ClusterIP' | 'NodePort' | 'LoadBalancer';
  readonly nodePort?: number;
  readonly annotations?: Record<string, string>;
  readonly sessionAffinity?: boolean;
  readonly externalTrafficPolicy?: 'Cluster' | 'Local';
  readonly healthCheckNodePort?: number;
  readonly externalIPs?: readonly string[];
  readonly loadBalancerSourceRanges?: readonly string[];
}

export function serviceObject(spec: ServiceSpecInput): KubeObjectInput {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: spec.name, namespace: 'default', ...(spec.annotations && { annotations: spec.annotations }) },
    spec: {
      type: spec.type ?? 'ClusterIP',
      clusterIP: spec.clusterIP,
      clusterIPs: [spec.clusterIP],
      ports: [{ name: 'http', protocol: spec.protocol ?? 'TCP', port: spec.port ?? 80, targetPort: spec.targetPort ?? 8080, ...(spec.nodePort && { nodePort: spec.nodePort }) }],
      ...(spec.sessionAffinity && { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } } }),
      ...(spec.externalTrafficPolicy && { externalTrafficPolicy: spec.externalTrafficPolicy }),
      ...(spec.healthCheckNodePort && { healthCheckNodePort: spec.healthCheckNodePort }),
      ...(spec.externalIPs && { externalIPs: [...spec.externalIPs] }),
      ...(spec.loadBalancerSourceRanges && { loadBalancerSourceRanges: [...spec.loadBalancerSourceRanges] }),
    },
  };
}

export function sliceObject(
  service: string,
  endpoints: { ip: string; node?: string; ready?: boolean; serving?: boolean; terminating?: boolean }[],
  port = 8080,
  protocol: 'TCP' | 'UDP' = 'TCP',
): KubeObjectInput {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `${service}-a`, namespace: 'default', labels: { 'kubernetes.io/service-name': service } },
    addressType: 'IPv4',
    ports: [{ name: 'http', protocol, port }],
    endpoints: endpoints.map((endpoint) => ({
      addresses: [endpoint.ip],
      conditions: {
        ready: endpoint.ready ?? true,
        ...(endpoint.serving !== undefined && { serving: endpoint.serving }),
        ...(endpoint.terminating !== undefined && { terminating: endpoint.terminating }),
      },
      nodeName: endpoint.node ?? NODE_NAME,
    })),
  };
}
