/**
 * The Services scenarios' cluster on a real IPVS kernel: the QEMU guest. Everything about the network is in the guest
 * (an underlay bridge, two kubeadm-like nodes, their pods, an external router, each a network namespace there; dual-stack
 * as `npm start`); the embedded API server, the kubelets (testkit's LabKubelet on GuestNode) and one proxy-ipvs per node
 * (assembled as the agent assembles it, its commands sent to the guest through the kernel's runner, into its node's
 * namespace) run in this process, with lballoc for LoadBalancer addresses. kubectl reaches the API server on this host;
 * the guest reaches it too, as a pod reaches kube-apiserver: the `kubernetes` Service's endpoint is a QEMU host forward
 * behind the router (API_SERVER_IN_GUEST).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { SyncScheduler, ServiceRegistry, type Controller, type PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { createKubeContext, KubeServices, loadKubeConfig, type KubeContext } from '@kube-router/kube';
import { lballocPlugin } from '@kube-router/lballoc';
import { AgentMetrics } from '@kube-router/metrics';
import { createProxyIpvsPlugin, type ProxyIpvsOptions } from '@kube-router/proxy-ipvs';
import { captureLogs, LabKubelet, POD_AGENT_FILES, startApiServer, type ApiServer, type KubeletNode, type KubeletSandbox, type LabContainerPort, type LogLine } from '@kube-router/testkit';
import { HOST_LINK, QemuGuest, type GuestOptions, type InteractiveProcess } from '@kube-router/testkit/qemu';
import { kubectlWith } from './kubectl.js';
import { NETNS_CLIENT_FILES } from './netns-client.js';
import type { ServiceLab } from './service-scenarios.js';

/** Where the helpers' scripts go in the guest. */
const GUEST_DIR = '/tmp/krt';
/**
 * The underlay between the nodes and the router, per family as testkit's lab (DEFAULT_UNDERLAY_CIDRS); node i is
 * .(10 + i) and ::(10 + i), the router .2 and ::2.
 */
const UNDERLAY = { ipv4: { prefix: '10.250.0.', length: 24 }, ipv6: { prefix: 'fd00:10:250::', length: 64 } } as const;
const ROUTER_IPS = [`${UNDERLAY.ipv4.prefix}2`, `${UNDERLAY.ipv6.prefix}2`] as const;
/**
 * The lab's values (apps/lab/src/lab.ts, testkit's cluster): the API server's default Service ranges, the lab's
 * LoadBalancer ranges, node i's pod CIDRs; IPv4 first.
 */
const GUEST_LAB_RANGES = {
  serviceClusterIp: ['10.96.0.0/12', 'fd00:10:96::/108'],
  loadBalancer: ['10.255.0.0/24', 'fd00:255::/120'],
  podCidrs: (node: number) => [`10.244.${node}.0/24`, `fd00:10:244:${node.toString(16)}::/64`],
} as const;
/**
 * Where pods in the guest reach the API server on this host: a QEMU host forward on the guest's user network (the
 * router's second link), at the server's own port. It is kube-apiserver's --advertise-address for the `kubernetes`
 * Service's EndpointSlice, so that Service is served as in a cluster whose API server is outside the pod network.
 */
const API_SERVER_IN_GUEST = '10.0.2.100';
/**
 * Why a pod on a node without a local endpoint gets no answer from an externalTrafficPolicy Local LoadBalancer address
 * on IPVS (kube-proxy's nftables and iptables modes send it to the cluster's endpoints): kubernetes/kubernetes#93456.
 */
export const IPVS_LOCAL_LOADBALANCER_FROM_PODS =
  'IPVS has one virtual server per address and port, the same for every client: under Local its real servers are this ' +
  "node's endpoints, none here, so a pod's connection is dropped as an outside client's is (kubernetes#93456)";
/** The pods' next hop per family, on every node-side veth. */
const POD_GATEWAY = { ipv4: '169.254.1.1', ipv6: 'fe80::1' } as const;
/**
 * Run first in every namespace the lab makes: links made there after it skip duplicate address detection, so an IPv6
 * address is usable at once (a tentative one cannot be a source for a second or more, under TCG longer).
 */
const NO_DAD = 'sysctl -qw net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.all.accept_dad=0';
const podStartTimeoutMs = 60_000;

export interface GuestSandbox extends KubeletSandbox {
  readonly namespace: string;
  readonly name: string;
  readonly netns: string;
  readonly ips: string[];
  readonly agent: InteractiveProcess;
}

/** One node in the guest: its namespace on the underlay, and pods behind routed veths (as world.ts's ProxyWorld). */
export class GuestNode implements KubeletNode<GuestSandbox> {
  /** IPv4 first, as the Node's InternalIPs. */
  readonly nodeIps: readonly string[];
  /** IPv4 first, as the Node's spec.podCIDRs. */
  readonly podCidrs: readonly string[];
  #nextPod = 2;

  constructor(
    readonly guest: QemuGuest,
    readonly runId: string,
    readonly nodeName: string,
    readonly index: number,
  ) {
    this.nodeIps = [`${UNDERLAY.ipv4.prefix}${10 + index}`, `${UNDERLAY.ipv6.prefix}${10 + index}`];
    this.podCidrs = GUEST_LAB_RANGES.podCidrs(index);
  }

  get netns(): string {
    return `krt-${this.runId}-${this.nodeName}`;
  }

  /** The node's namespace, its uplink on the underlay bridge, its default routes through the router. */
  async create(underlayNetns: string): Promise<void> {
    const uplink = `krt-n${this.index}`;
    await this.guest.sh(`set -e
      ip netns add ${this.netns}
      ip netns exec ${this.netns} ${NO_DAD} net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
      ip -n ${this.netns} link set lo up
      ip -n ${underlayNetns} link add ${uplink} type veth peer name eth0 netns ${this.netns}
      ip -n ${underlayNetns} link set ${uplink} master br0 up
      ip -n ${this.netns} addr add ${this.nodeIps[0]}/${UNDERLAY.ipv4.length} dev eth0
      ip -n ${this.netns} addr add ${this.nodeIps[1]}/${UNDERLAY.ipv6.length} dev eth0
      ip -n ${this.netns} link set eth0 up
      ip -n ${this.netns} route add default via ${ROUTER_IPS[0]}
      ip -n ${this.netns} -6 route add default via ${ROUTER_IPS[1]}`);
  }

  async addSandbox(pod: { namespace: string; name: string; ports: readonly LabContainerPort[] }): Promise<GuestSandbox> {
    const index = this.#nextPod++;
    if (index > 254) throw new Error(`guest node ${this.nodeName} has no pod address left in ${this.podCidrs[0]}`);
    // The index's digits read the same in both: 10.244.1.23 and fd00:10:244:1::23.
    const ips = [this.podCidrs[0]!.replace(/\.0\/24$/, `.${index}`), this.podCidrs[1]!.replace(/::\/64$/, `::${index}`)];
    const netns = `krt-${this.runId}-p${this.index}-${index}`;
    const host = `krt-v${this.index}-${index}`;
    await this.guest.sh(`set -e
      ip netns add ${netns}
      ip netns exec ${netns} ${NO_DAD}
      ip -n ${this.netns} link add ${host} type veth peer name eth0 netns ${netns}
      ip -n ${this.netns} addr add ${POD_GATEWAY.ipv4}/32 dev ${host}
      ip -n ${this.netns} addr add ${POD_GATEWAY.ipv6}/64 dev ${host}
      ip -n ${this.netns} link set ${host} up
      ip -n ${this.netns} route add ${ips[0]}/32 dev ${host}
      ip -n ${this.netns} route add ${ips[1]}/128 dev ${host}
      ip -n ${netns} link set lo up
      ip -n ${netns} link set eth0 up
      ip -n ${netns} addr add ${ips[0]}/32 dev eth0
      ip -n ${netns} addr add ${ips[1]}/128 dev eth0
      ip -n ${netns} route add ${POD_GATEWAY.ipv4} dev eth0
      ip -n ${netns} route add default via ${POD_GATEWAY.ipv4} dev eth0
      ip -n ${netns} -6 route add default via ${POD_GATEWAY.ipv6} dev eth0`);
    const identity = `${pod.namespace}/${pod.name}`;
    const ports = pod.ports.map((port) => ({ port: port.port, protocol: port.protocol ?? 'TCP' }));
    let agent: InteractiveProcess | undefined;
    try {
      agent = await this.guest.spawnInteractive({
        command: 'node',
        args: [`${GUEST_DIR}/pod-agent.mjs`, netns, identity, JSON.stringify({ identity, ports })],
        netns,
      });
      await readyLine(agent, `pod ${identity} on ${this.nodeName}`);
    } catch (error) {
      agent?.kill();
      await this.guest.sh(`ip netns del ${netns}`).catch(() => undefined);
      throw error;
    }
    const sandbox: GuestSandbox = { namespace: pod.namespace, name: pod.name, netns, ips, agent };
    return sandbox;
  }

  addHostNetworkSandbox(pod: { namespace: string; name: string }): Promise<GuestSandbox> {
    return Promise.reject(new Error(`guest node ${this.nodeName} runs no hostNetwork pods (${pod.namespace}/${pod.name}): no scenario needs one`));
  }

  async removeSandbox(sandbox: GuestSandbox): Promise<void> {
    sandbox.agent.kill();
    // Its veth (and the /32 route on it) goes with the namespace.
    await this.guest.sh(`ip netns del ${sandbox.netns} 2>/dev/null; true`);
  }
}

/** Resolves at the pod agent's `{"type":"ready"}` line; rejects on its error line, its exit or the timeout. */
function readyLine(agent: InteractiveProcess, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    let stderr = '';
    const timer = setTimeout(() => done(new Error(`${what} was not ready within ${podStartTimeoutMs} ms: ${output}${stderr}`)), podStartTimeoutMs);
    const onData = (chunk: string) => {
      output += chunk;
      if (output.includes('"type":"ready"')) done();
      else if (output.includes('"type":"error"')) done(new Error(`${what}: ${output.trim()}`));
    };
    const onStderr = (chunk: string) => (stderr = (stderr + chunk).slice(-2000));
    const done = (error?: Error) => {
      clearTimeout(timer);
      agent.stdout.off('data', onData);
      agent.stderr.off('data', onStderr);
      if (error) reject(error);
      else resolve();
    };
    agent.stdout.setEncoding('utf8').on('data', onData);
    agent.stderr.setEncoding('utf8').on('data', onStderr);
    agent.once('close', (code, signal) => done(new Error(`${what} exited (${code ?? signal}): ${stderr.trim()}`)));
  });
}

interface RunningController {
  readonly controller: Controller;
  readonly scheduler: SyncScheduler;
}

/** One node's agent, as much of it as the scenarios need: its Kubernetes context and its controllers' schedulers. */
interface GuestAgent {
  readonly kube: KubeContext;
  readonly controllers: RunningController[];
  /** The controllers' start signal: aborted when the agent stops, so that a sync in flight ends rather than being waited out. */
  readonly stopping: AbortController;
}

export interface GuestServicesLabOptions {
  /** How to boot the guest (the lab boots it, with the API server's forward, and powers it off on close). */
  boot?: Omit<GuestOptions, 'hostForwards'>;
  runId: string;
  /** Node names; two by default, as `npm start`. */
  nodes?: readonly string[];
  /** More proxy-ipvs options for every node. */
  proxy?: Partial<ProxyIpvsOptions>;
}

/** One sync of a node's proxy: how long it took, which the guest's slowness is mostly made of. */
export interface GuestSync {
  node: string;
  controller: string;
  ok: boolean;
  durationMs: number;
}

/** The cluster, ready: the ServiceLab the scenarios take, and what to print when one fails. */
export class GuestServicesLab {
  readonly logs: LogLine[];
  readonly syncs: GuestSync[] = [];
  readonly #agents: GuestAgent[] = [];
  readonly #kubelets: LabKubelet<GuestSandbox>[] = [];

  private constructor(
    readonly guest: QemuGuest,
    readonly server: ApiServer,
    readonly kubeconfig: string,
    readonly nodes: readonly GuestNode[],
    readonly routerNetns: string,
    logs: LogLine[],
  ) {
    this.logs = logs;
  }

  static async start(options: GuestServicesLabOptions): Promise<GuestServicesLab> {
    const { runId } = options;
    // The server first: the guest's forward to it is fixed at boot, at the server's port.
    const server = await startApiServer({
      port: 0,
      seed: [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kube-system' } }],
      endpointSliceController: { advertiseAddress: API_SERVER_IN_GUEST },
      gracefulPodDeletion: true,
      // HTTPS with its own CA and an administrator's token, as kube-apiserver and `npm start`: a pod's handshake
      // through the ClusterIP reaches it. (kubectl asks for a password on HTTPS without a credential.)
      tls: true,
      tokens: [randomBytes(24).toString('hex')],
    });
    let guest: QemuGuest | undefined;
    let network: { nodes: GuestNode[]; routerNetns: string };
    let kubeconfig: string;
    try {
      guest = await QemuGuest.boot({ ...options.boot, hostForwards: [{ guestAddress: API_SERVER_IN_GUEST, guestPort: server.port, hostPort: server.port }] });
      network = await buildNetwork(guest, runId, options.nodes ?? ['lab-node-1', 'lab-node-2']);
      for (const node of network.nodes) {
        server.create({
          apiVersion: 'v1',
          kind: 'Node',
          metadata: { name: node.nodeName, labels: { 'kubernetes.io/hostname': node.nodeName, 'kubernetes.io/os': 'linux' }, annotations: { 'lab.kube-router.io/netns': node.netns } },
          spec: { podCIDR: node.podCidrs[0], podCIDRs: node.podCidrs },
          status: {
            addresses: [...node.nodeIps.map((address) => ({ type: 'InternalIP', address })), { type: 'Hostname', address: node.nodeName }],
            conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', lastHeartbeatTime: new Date().toISOString(), lastTransitionTime: new Date().toISOString() }],
          },
        });
      }
      kubeconfig = await server.writeKubeconfig();
    } catch (error) {
      await guest?.close().catch(() => undefined);
      await server.close().catch(() => undefined);
      throw error;
    }
    const { nodes, routerNetns } = network;
    const { logger, lines } = captureLogs('warn');
    const lab = new GuestServicesLab(guest, server, kubeconfig, nodes, routerNetns, lines);
    try {
      for (const node of nodes) {
        const kubelet = new LabKubelet<GuestSandbox>(loadKubeConfig({ kubeconfig, env: {} }), node);
        lab.#kubelets.push(kubelet);
        await kubelet.start();
      }
      for (const [index, node] of nodes.entries()) {
        await startAgent(lab.#agents, {
            kubeconfig,
            node,
            logger: logger.child({ node: node.nodeName }),
            runner: guest.runner,
            proxy: {
              netns: node.netns,
              enableIpv6: true,
              serviceClusterIpRanges: [...GUEST_LAB_RANGES.serviceClusterIp],
              loadBalancerIpRanges: [...GUEST_LAB_RANGES.loadBalancer],
              // --hairpin-mode, as kube-router documents for a pod that reaches itself through its Service (e2e's
              // hairpin test): without it only Services annotated kube-router.io/service.hairpin get the SNAT.
              hairpinMode: true,
              ...options.proxy,
            },
            // The allocator is leader-elected in the agent; one node runs it here.
            lballoc: index === 0 ? { ranges: [...GUEST_LAB_RANGES.loadBalancer] } : undefined,
            onSync: (sync) => lab.syncs.push(sync),
          });
      }
    } catch (error) {
      await lab.close();
      throw error;
    }
    return lab;
  }

  get serviceLab(): ServiceLab {
    return {
      kubectl: (...args) => this.kubectl(...args),
      kubectlApply: (manifest) => this.kubectlApply(manifest),
      nodes: this.nodes.map((node) => ({ name: node.nodeName, netns: node.netns, addresses: node.nodeIps })),
      router: { netns: this.routerNetns, addresses: ROUTER_IPS },
      launchHelper: (netns) => this.guest.spawnInteractive({ command: 'node', args: [`${GUEST_DIR}/netns-client.mjs`, netns], netns }),
      // node's start under TCG on a loaded machine: seconds, sometimes more than the host's 15 s.
      helperStartTimeoutMs: 60_000,
      cannot: { localLoadBalancerFromPods: IPVS_LOCAL_LOADBALANCER_FROM_PODS },
    };
  }

  kubectl(...args: string[]): Promise<string> {
    return kubectlWith(this.kubeconfig).kubectl(...args);
  }

  kubectlApply(manifest: string): Promise<void> {
    return kubectlWith(this.kubeconfig).kubectlApply(manifest);
  }

  /** The proxy's view of a node's kernel, for a failure's message: its IPVS table. */
  async ipvs(node: GuestNode): Promise<string> {
    return (await this.guest.run({ command: 'ipvsadm', args: ['-Ln'], netns: node.netns }).catch((error: unknown) => ({ stdout: String(error) }))).stdout;
  }

  /** Stops the agents and the kubelets (their pods go with the guest), then the API server, then powers the guest off. */
  async close(): Promise<void> {
    for (const agent of this.#agents.splice(0)) {
      agent.stopping.abort();
      for (const { scheduler } of agent.controllers) await scheduler.stop().catch(() => undefined);
      await agent.kube.informers.stop().catch(() => undefined);
    }
    for (const kubelet of this.#kubelets.splice(0)) await kubelet.stop().catch(() => undefined);
    try {
      await this.server.close();
    } finally {
      await this.guest.close();
    }
  }
}

/**
 * The guest's network: the helpers' scripts, the underlay bridge, the router (with the user network's link, masquerading
 * the pods' connections to the API server's forward) and the nodes, dual-stack. What kube-router's routing does in the
 * lab (BGP between the nodes and to the router) is played with static routes: each node reaches the others' pod CIDRs,
 * the router reaches every pod CIDR (kube-router advertises them to external peers by default) and the LoadBalancer
 * ranges through the first node.
 */
async function buildNetwork(guest: QemuGuest, runId: string, names: readonly string[]): Promise<{ nodes: GuestNode[]; routerNetns: string }> {
  for (const [name, path] of Object.entries({ ...POD_AGENT_FILES, ...NETNS_CLIENT_FILES })) {
    await guest.writeFile(`${GUEST_DIR}/${name}`, readFileSync(path, 'utf8'));
  }
  const underlayNetns = `krt-${runId}-underlay`;
  const routerNetns = `krt-${runId}-router`;
  const hostLink = 'krt-host';
  await guest.sh(`set -e
    ip netns add ${underlayNetns}
    ip netns exec ${underlayNetns} ${NO_DAD}
    ip -n ${underlayNetns} link set lo up
    ip -n ${underlayNetns} link add br0 type bridge
    ip -n ${underlayNetns} link set br0 up
    ip netns add ${routerNetns}
    ip netns exec ${routerNetns} ${NO_DAD} net.ipv4.ip_forward=1
    ip -n ${routerNetns} link set lo up
    ip -n ${underlayNetns} link add krt-r type veth peer name eth0 netns ${routerNetns}
    ip -n ${underlayNetns} link set krt-r master br0 up
    ip -n ${routerNetns} addr add ${ROUTER_IPS[0]}/${UNDERLAY.ipv4.length} dev eth0
    ip -n ${routerNetns} addr add ${ROUTER_IPS[1]}/${UNDERLAY.ipv6.length} dev eth0
    ip -n ${routerNetns} link set eth0 up
    ip link set ${HOST_LINK.interface} name ${hostLink}
    ip link set ${hostLink} netns ${routerNetns}
    ip -n ${routerNetns} addr add ${HOST_LINK.guestAddress}/${HOST_LINK.network.split('/')[1]} dev ${hostLink}
    ip -n ${routerNetns} link set ${hostLink} up
    ip netns exec ${routerNetns} iptables -t nat -A POSTROUTING -o ${hostLink} -j MASQUERADE`);
  const nodes = names.map((name, index) => new GuestNode(guest, runId, name, index + 1));
  for (const node of nodes) await node.create(underlayNetns);
  const [first] = nodes;
  await guest.sh(
    [
      ...nodes.flatMap((node) =>
        nodes.filter((other) => other !== node).flatMap((other) => other.podCidrs.map((cidr, family) => `ip -n ${node.netns} route add ${cidr} via ${other.nodeIps[family]}`)),
      ),
      ...nodes.flatMap((node) => node.podCidrs.map((cidr, family) => `ip -n ${routerNetns} route add ${cidr} via ${node.nodeIps[family]}`)),
      ...GUEST_LAB_RANGES.loadBalancer.map((range, family) => `ip -n ${routerNetns} route add ${range} via ${first!.nodeIps[family]}`),
    ].join('\n'),
  );
  return { nodes, routerNetns };
}

/**
 * The agent's order (createAgent): create the plugins, start the controllers, wait for the caches, then sync. The
 * agent joins `agents` before anything of it starts, so that the lab's close() stops what started if a step throws.
 */
async function startAgent(agents: GuestAgent[], input: {
  kubeconfig: string;
  node: GuestNode;
  logger: PluginContext['logger'];
  runner: QemuGuest['runner'];
  proxy: ProxyIpvsOptions;
  lballoc: { ranges: string[] } | undefined;
  onSync: (sync: GuestSync) => void;
}): Promise<void> {
  const { node, logger } = input;
  const metrics = new AgentMetrics({ collectDefaultMetrics: false });
  const health = new HealthRegistry({ defaultGraceMs: 60_000 });
  const kube = createKubeContext({
    kubeConfig: loadKubeConfig({ kubeconfig: input.kubeconfig, env: {} }),
    nodeName: node.nodeName,
    logger,
    metrics,
    leaderElection: { namespace: 'kube-system', identity: node.nodeName },
  });
  const services = new ServiceRegistry();
  services.provide(KubeServices, kube);
  const ctx: PluginContext = { nodeName: node.nodeName, logger, metrics, health, services };
  const proxyPlugin = createProxyIpvsPlugin({ runner: input.runner });
  const controllers: Controller[] = [await proxyPlugin.create(ctx, proxyPlugin.options.parse(input.proxy))];
  if (input.lballoc) controllers.push(await lballocPlugin.create(ctx, lballocPlugin.options.parse(input.lballoc)));
  const stopping = new AbortController();
  const running = controllers.map((controller) => ({
    controller,
    scheduler: new SyncScheduler(controller, {
      onSync: (_reason, outcome) => input.onSync({ node: node.nodeName, controller: controller.name, ok: outcome.ok, durationMs: Math.round(outcome.durationMs) }),
    }),
  }));
  agents.push({ kube, controllers: running, stopping });
  for (const { controller, scheduler } of running) await controller.start({ requestSync: (reason) => scheduler.requestSync(reason), signal: stopping.signal });
  await kube.informers.start({ cacheSyncTimeoutMs: 30_000 });
  health.restartClocks();
  for (const { scheduler } of running) scheduler.start();
}
