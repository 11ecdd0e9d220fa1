import { readFile } from 'node:fs/promises';
import { cniAdd, cniDel, type CniInvocation } from '../cni/cni-runner.js';
import { trackNetns, untrackNetns } from './exit-cleanup.js';
import { IpAllocator, firstHostAddress, ipFamily, parsePodCidrs } from './ip-allocator.js';
import type { IpFamily, PodCidr } from './ip-allocator.js';
import { nextSandboxNames, nodeNetnsName } from './names.js';
import { addNetns, deleteNetns, ipBatch, setSysctls } from './netns.js';
import { PodAgent } from './pod-agent.js';
import type { ListenPort } from './pod-agent.js';
import type { LabProtocol } from './probe-types.js';
import { unsupportedProtocolReason } from './protocols.js';
import { runCommand } from './run-command.js';

/** The pods' IPv4 next hop: a link-local address on the node netns's loopback, answered by ordinary ARP. */
export const POD_GATEWAY_V4 = '169.254.1.1';
/** The pods' IPv6 next hop: the same link-local address on every node-side veth. */
export const POD_GATEWAY_V6 = 'fe80::1';
/** The pod's interface name inside its own netns. */
export const POD_INTERFACE = 'eth0';

export interface LabNodeOptions {
  runId: string;
  nodeName: string;
  podCidrs: readonly string[];
  /** The node's own addresses, put on the node netns's loopback; the first host address of each pod CIDR by default. */
  nodeIps?: readonly string[];
  /** Plugs the node into an underlay: its addresses then go on the uplink, with the underlay's prefix lengths. */
  uplink?: LabNodeUplink;
  /**
   * Attach pods as a kubelet does, with the CNI plugins of this configuration list (kube-router's: bridge and
   * host-local on kube-bridge), read at each pod's ADD, instead of the lab's routed veths. Until the file gives
   * host-local its ranges (the agent writes them), pods fail to start and the kubelet retries.
   */
  cniConfFile?: string;
}

/** The interface of a lab node on the underlay, inside the node netns. */
export const NODE_UPLINK_INTERFACE = 'eth0';

export interface LabNodeUplink {
  /** The underlay's network namespace and the bridge in it that the uplink's other end joins. */
  netns: string;
  bridge: string;
  /** The other end's name in the underlay namespace (unique there). */
  peerName: string;
  /** Prefix length of the node's addresses on the uplink, by family. */
  prefixLengths: Readonly<Record<IpFamily, number>>;
  /**
   * The node's default gateways on the underlay, at most one per family: a real node always has a default route,
   * and traffic to a Service address (a ClusterIP, one without endpoints) must get past routing to reach the service
   * proxy's DNAT and reject rules, not fail with ENETUNREACH.
   */
  gateways?: readonly string[];
}

export interface ContainerPort {
  port: number;
  protocol?: LabProtocol;
  name?: string;
}

export interface SkippedPort {
  port: number;
  protocol: LabProtocol;
  reason: string;
}

export interface PodSandbox {
  namespace: string;
  name: string;
  netns: string;
  /** The node side of the pod's veth pair, in the node netns; undefined for a host-network pod and a CNI-attached one. */
  hostInterface: string | undefined;
  /** Attached by the CNI plugins: detached by them (CNI DEL) too. */
  cni: boolean;
  /** A host-network pod shares the node netns and its addresses. */
  hostNetwork: boolean;
  /** One address per pod CIDR, in the order of the node's pod CIDRs. */
  ips: string[];
  ports: ListenPort[];
  skippedPorts: SkippedPort[];
  agent: PodAgent;
}

/**
 * One lab node as network namespaces: a node netns (where a dataplane agent programs iptables, ipsets and nftables)
 * and one netns per pod, each joined to the node netns by a routed veth pair. Every packet between two pods crosses
 * the node netns's FORWARD chain, as it would on a node with a routed CNI.
 */
export class LabNode {
  private readonly allocators: Map<IpFamily, IpAllocator>;
  private readonly sandboxes = new Set<PodSandbox>();

  private constructor(
    readonly runId: string,
    readonly nodeName: string,
    readonly netns: string,
    readonly podCidrs: readonly PodCidr[],
    readonly nodeIps: readonly string[],
    readonly cniConfFile: string | undefined,
  ) {
    this.allocators = new Map(podCidrs.map((cidr) => [cidr.family, new IpAllocator(cidr, nodeIps)]));
  }

  static async create(options: LabNodeOptions): Promise<LabNode> {
    const podCidrs = parsePodCidrs(options.podCidrs);
    const nodeIps = options.nodeIps ? [...options.nodeIps] : podCidrs.map(firstHostAddress);
    for (const address of nodeIps) {
      if (ipFamily(address) === undefined) throw new Error(`node IP "${address}" is not an IP address`);
    }
    const netns = nodeNetnsName(options.runId, options.nodeName);
    await addNetns(netns);
    trackNetns(netns);
    try {
      await setSysctls(netns, {
        'net.ipv4.conf.all.forwarding': 1,
        'net.ipv6.conf.all.forwarding': 1,
        // Addresses must be usable at once: duplicate address detection would hold them back for a second or more.
        'net.ipv6.conf.all.accept_dad': 0,
        'net.ipv6.conf.default.accept_dad': 0,
      });
      const { uplink } = options;
      if (uplink) {
        await runCommand('ip', [
          '-n', netns, 'link', 'add', NODE_UPLINK_INTERFACE, 'type', 'veth',
          'peer', 'name', uplink.peerName, 'netns', uplink.netns,
        ]);
        await ipBatch(uplink.netns, [`link set ${uplink.peerName} master ${uplink.bridge}`, `link set ${uplink.peerName} up`]);
      }
      await ipBatch(netns, [
        'link set lo up',
        ...(uplink
          ? [
              `link set ${NODE_UPLINK_INTERFACE} up`,
              ...nodeIps.map((address) => {
                const family = ipFamily(address) === 4 ? 4 : 6;
                return `addr add ${address}/${uplink.prefixLengths[family]} dev ${NODE_UPLINK_INTERFACE}${family === 6 ? ' nodad' : ''}`;
              }),
              ...defaultRouteCommands(uplink.gateways ?? []),
            ]
          : nodeIps.map((address) => `addr add ${address}/${ipFamily(address) === 4 ? 32 : 128} dev lo`)),
        // Scope link keeps the gateway address from becoming the source of the node's own traffic to pods.
        `addr add ${POD_GATEWAY_V4}/32 dev lo scope link`,
      ]);
    } catch (error) {
      await deleteNetns(netns).catch(() => undefined);
      untrackNetns(netns);
      throw error;
    }
    return new LabNode(options.runId, options.nodeName, netns, podCidrs, nodeIps, options.cniConfFile);
  }

  /** Creates a pod's netns, wires it to the node and starts its agent listening on the pod's ports. */
  async addSandbox(pod: { namespace: string; name: string; ports: readonly ContainerPort[] }): Promise<PodSandbox> {
    if (this.cniConfFile !== undefined) return this.addCniSandbox(pod, this.cniConfFile);
    const names = nextSandboxNames(this.runId, pod.namespace, pod.name);
    const { ports, skippedPorts } = listenPorts(pod.ports);
    const ips: string[] = [];
    let netnsCreated = false;
    let agent: PodAgent | undefined;
    try {
      for (const cidr of this.podCidrs) ips.push(this.allocator(cidr.family).allocate());
      await addNetns(names.netns);
      netnsCreated = true;
      trackNetns(names.netns);
      await setSysctls(names.netns, { 'net.ipv6.conf.all.accept_dad': 0, 'net.ipv6.conf.default.accept_dad': 0 });
      await runCommand('ip', [
        '-n', this.netns, 'link', 'add', names.hostInterface, 'type', 'veth',
        'peer', 'name', POD_INTERFACE, 'netns', names.netns,
      ]);
      await ipBatch(this.netns, this.nodeSideCommands(names.hostInterface, ips));
      await ipBatch(names.netns, podSideCommands(ips));
      agent = await PodAgent.start(names.netns, `${pod.namespace}/${pod.name}`, ports);
    } catch (error) {
      await agent?.stop();
      if (netnsCreated) await this.removeNetworking(names.netns, names.hostInterface).catch(() => undefined);
      for (const address of ips) this.releaseIp(address);
      throw error;
    }
    const sandbox: PodSandbox = { ...pod, ...names, hostNetwork: false, cni: false, ips, ports, skippedPorts, agent };
    this.sandboxes.add(sandbox);
    return sandbox;
  }

  /** As a kubelet with a CNI network: the pod's netns, then CNI ADD of every plugin of the list, in the node netns. */
  private async addCniSandbox(pod: { namespace: string; name: string; ports: readonly ContainerPort[] }, confFile: string): Promise<PodSandbox> {
    const names = nextSandboxNames(this.runId, pod.namespace, pod.name);
    const { ports, skippedPorts } = listenPorts(pod.ports);
    const invocation = { nodeNetns: this.netns, podNetns: names.netns, containerId: names.netns };
    let netnsCreated = false;
    let added = false;
    let agent: PodAgent | undefined;
    try {
      const config = JSON.parse(await readFile(confFile, 'utf8')) as CniInvocation['config'];
      await addNetns(names.netns);
      netnsCreated = true;
      trackNetns(names.netns);
      await setSysctls(names.netns, { 'net.ipv6.conf.all.accept_dad': 0, 'net.ipv6.conf.default.accept_dad': 0 });
      await ipBatch(names.netns, ['link set lo up']);
      added = true;
      const { addresses } = await cniAdd({ ...invocation, config });
      // Primary family first, as status.podIPs lists them.
      const ips = addresses.map((address) => address.split('/')[0]!).sort((a, b) => familyRank(this.podCidrs, a) - familyRank(this.podCidrs, b));
      agent = await PodAgent.start(names.netns, `${pod.namespace}/${pod.name}`, ports);
      const sandbox: PodSandbox = { ...pod, netns: names.netns, hostInterface: undefined, hostNetwork: false, cni: true, ips, ports, skippedPorts, agent };
      this.sandboxes.add(sandbox);
      return sandbox;
    } catch (error) {
      await agent?.stop();
      // A failed ADD leaves what it made (a veth, a lease): DEL takes it back, as the kubelet tears a sandbox down.
      const cleanup = await this.teardownCniSandbox(names.netns, confFile, { added, netnsCreated });
      if (cleanup.length > 0) throw new AggregateError([error, ...cleanup], `${describeError(error)}; cleaning up failed too`, { cause: error });
      throw error;
    }
  }

  /**
   * CNI DEL, then the pod's netns, each attempted whatever the other did; a netns stays tracked (removed at exit)
   * until it is really gone. Returns the failures.
   */
  private async teardownCniSandbox(podNetns: string, confFile: string, made: { added: boolean; netnsCreated: boolean }): Promise<unknown[]> {
    const failures: unknown[] = [];
    if (made.added) await this.cniDel(podNetns, confFile).catch((error: unknown) => failures.push(error));
    if (made.netnsCreated) {
      try {
        await deleteNetns(podNetns);
        untrackNetns(podNetns);
      } catch (error) {
        failures.push(error);
      }
    }
    return failures;
  }

  private async cniDel(podNetns: string, confFile: string): Promise<void> {
    const config = JSON.parse(await readFile(confFile, 'utf8')) as CniInvocation['config'];
    await cniDel({ config, nodeNetns: this.netns, podNetns, containerId: podNetns });
  }

  /** A host-network pod: only an agent, in the node netns, answering on the node's addresses. */
  async addHostNetworkSandbox(pod: { namespace: string; name: string; ports: readonly ContainerPort[] }): Promise<PodSandbox> {
    const { ports, skippedPorts } = listenPorts(pod.ports);
    const agent = await PodAgent.start(this.netns, `${pod.namespace}/${pod.name}`, ports);
    const sandbox: PodSandbox = {
      ...pod,
      netns: this.netns,
      hostInterface: undefined,
      hostNetwork: true,
      cni: false,
      ips: [...this.nodeIps],
      ports,
      skippedPorts,
      agent,
    };
    this.sandboxes.add(sandbox);
    return sandbox;
  }

  /** Stops the pod's agent and removes its veth pair and netns (a host-network pod has only the agent). */
  async removeSandbox(sandbox: PodSandbox): Promise<void> {
    await sandbox.agent.stop();
    if (sandbox.cni && this.cniConfFile !== undefined) {
      const failures = await this.teardownCniSandbox(sandbox.netns, this.cniConfFile, { added: true, netnsCreated: true });
      if (failures.length > 0) throw new AggregateError(failures, `removing pod ${sandbox.namespace}/${sandbox.name} from lab node ${this.nodeName} failed`);
    } else if (!sandbox.hostNetwork && sandbox.hostInterface !== undefined) {
      await this.removeNetworking(sandbox.netns, sandbox.hostInterface);
      for (const address of sandbox.ips) this.releaseIp(address);
    }
    this.sandboxes.delete(sandbox);
  }

  /** Removes every pod and then the node netns; it tries every step and reports the failures together. */
  async destroy(): Promise<void> {
    const results = await Promise.allSettled([...this.sandboxes].map((sandbox) => this.removeSandbox(sandbox)));
    const errors = results.flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []));
    try {
      await deleteNetns(this.netns);
      untrackNetns(this.netns);
    } catch (error) {
      errors.push(error);
    }
    if (errors.length > 0) throw new AggregateError(errors, `stopping lab node ${this.nodeName} failed`);
  }

  private async removeNetworking(netns: string, hostInterface: string): Promise<void> {
    // Deleting the veth first removes both ends and the pod's routes at once; a deleted netns only lets go of its
    // interfaces later, in the background, when an address could already have been handed to the next pod.
    await runCommand('ip', ['-n', this.netns, 'link', 'del', hostInterface]).catch(async (error: unknown) => {
      const links = await runCommand('ip', ['-n', this.netns, '-o', 'link', 'show']);
      if (links.includes(` ${hostInterface}@`) || links.includes(` ${hostInterface}:`)) throw error;
    });
    await deleteNetns(netns);
    untrackNetns(netns);
  }

  private nodeSideCommands(hostInterface: string, ips: readonly string[]): string[] {
    const commands = [`link set ${hostInterface} up`];
    // The pod's gateway on its own veth as well as on lo: with arp_ignore=1 (kube-router's service proxy sets it for
    // IPVS) the node answers ARP only for addresses of the interface the request came in on.
    if (ips.some((address) => ipFamily(address) === 4)) {
      commands.push(`addr add ${POD_GATEWAY_V4}/32 dev ${hostInterface} scope link`);
    }
    if (ips.some((address) => ipFamily(address) === 6)) {
      commands.push(`addr add ${POD_GATEWAY_V6}/64 dev ${hostInterface} nodad`);
    }
    for (const address of ips) {
      commands.push(`route add ${address}/${ipFamily(address) === 4 ? 32 : 128} dev ${hostInterface}`);
    }
    return commands;
  }

  private allocator(family: IpFamily): IpAllocator {
    const allocator = this.allocators.get(family);
    if (!allocator) throw new Error(`lab node ${this.nodeName} has no IPv${family} pod CIDR`);
    return allocator;
  }

  private releaseIp(address: string): void {
    const family = ipFamily(address);
    if (family !== undefined) this.allocators.get(family)?.release(address);
  }
}

/** `default via <gateway>` on the uplink, one per family; a gateway that is not an address is refused. */
function defaultRouteCommands(gateways: readonly string[]): string[] {
  const seen = new Set<IpFamily>();
  return gateways.map((gateway) => {
    const family = ipFamily(gateway);
    if (family === undefined) throw new Error(`default gateway "${gateway}" is not an IP address`);
    if (seen.has(family)) throw new Error(`more than one IPv${family} default gateway: ${gateways.join(', ')}`);
    seen.add(family);
    return `route add default via ${gateway} dev ${NODE_UPLINK_INTERFACE}`;
  });
}

function podSideCommands(ips: readonly string[]): string[] {
  const commands = ['link set lo up', `link set ${POD_INTERFACE} up`];
  for (const address of ips) {
    if (ipFamily(address) === 4) {
      commands.push(
        `addr add ${address}/32 dev ${POD_INTERFACE}`,
        `route add ${POD_GATEWAY_V4} dev ${POD_INTERFACE} scope link`,
        `route add default via ${POD_GATEWAY_V4} dev ${POD_INTERFACE}`,
      );
    } else {
      commands.push(
        `addr add ${address}/128 dev ${POD_INTERFACE} nodad`,
        `route add default via ${POD_GATEWAY_V6} dev ${POD_INTERFACE}`,
      );
    }
  }
  return commands;
}

/** The ports the agent can serve (TCP and UDP, once each) and the ones it cannot, with the reason. */
function listenPorts(ports: readonly ContainerPort[]): { ports: ListenPort[]; skippedPorts: SkippedPort[] } {
  const served = new Map<string, ListenPort>();
  const skippedPorts: SkippedPort[] = [];
  for (const { port, protocol = 'TCP' } of ports) {
    const reason = unsupportedProtocolReason(protocol);
    if (reason !== undefined) skippedPorts.push({ port, protocol, reason });
    else if (protocol === 'TCP' || protocol === 'UDP') served.set(`${protocol}/${port}`, { port, protocol });
  }
  return { ports: [...served.values()], skippedPorts };
}

/** The index of the pod CIDR whose family `address` is in: the node's primary family sorts first. */
function familyRank(podCidrs: readonly PodCidr[], address: string): number {
  const family = ipFamily(address);
  const index = podCidrs.findIndex((cidr) => cidr.family === family);
  return index < 0 ? podCidrs.length : index;
}

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
