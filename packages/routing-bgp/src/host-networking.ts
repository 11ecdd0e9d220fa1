import type { V1Node } from '@kubernetes/client-node';
import { nodePodCidrs } from '@kube-router/kube';
import type { CommandRunner, IpFamily, IpRoute2 } from '@kube-router/netfilter';
import type { Logger } from 'pino';
import { nodeAddresses } from './nodes.js';
import { PodEgress } from './pod-egress.js';
import { PodForwarding } from './pod-forwarding.js';
import { PodNetwork } from './pod-network.js';
import type { RoutingSettings } from './settings.js';

export interface HostNetworkingOptions {
  runner: CommandRunner;
  ip: IpRoute2;
  netns?: string;
  /** kube-bridge and the CNI file; undefined where a stand-in for the kernel has none of it. */
  podNetwork?: RoutingSettings['podNetwork'];
  logger: Logger;
}

/**
 * The node side of pod networking, apart from BGP: IPv6 switched on, kube-bridge and the CNI file's ranges, the
 * FORWARD rules and br_netfilter, and the pod egress MASQUERADE rule with its sets. Each method is one step of the
 * sync; without `podNetwork`, the bridge and forwarding steps do nothing.
 */
export class HostNetworking {
  readonly #podNetwork: PodNetwork | undefined;
  readonly #podForwarding: PodForwarding | undefined;
  readonly #podEgress: PodEgress;
  #ipv6SwitchedOn = false;

  constructor(private readonly options: HostNetworkingOptions) {
    const { runner, ip, netns, logger } = options;
    this.#podNetwork = options.podNetwork && new PodNetwork({ ip, logger, ...options.podNetwork });
    this.#podForwarding = options.podNetwork && new PodForwarding({ runner, ip, netns });
    this.#podEgress = new PodEgress({ runner, ...(netns && { netns }) });
  }

  /**
   * kube-router turns IPv6 on for the node (net.ipv6.conf.all.disable_ipv6=0) when it is enabled, and only logs a
   * failure (a kernel booted with ipv6.disable=1 has no such switch): so here, once per process until it works.
   */
  async switchIpv6On(): Promise<void> {
    if (this.#ipv6SwitchedOn) return;
    const { runner, netns, logger } = this.options;
    try {
      await runner.run({ command: 'sysctl', args: ['-q', '-w', 'net.ipv6.conf.all.disable_ipv6=0'], timeoutMs: 10_000, ...(netns && { netns }) });
      this.#ipv6SwitchedOn = true;
    } catch (error) {
      logger.warn({ err: error }, 'cannot switch IPv6 on (net.ipv6.conf.all.disable_ipv6=0) although --enable-ipv6 is set');
    }
  }

  /** kube-bridge and the CNI file: pods on this node get addresses from it whether or not any peer is up. */
  async syncPodNetwork(podCidrs: readonly string[], nodeAddress: string): Promise<void> {
    await this.#podNetwork?.sync(podCidrs, nodeAddress);
  }

  async syncPodForwarding(families: readonly IpFamily[], nodeAddress: string): Promise<void> {
    await this.#podForwarding?.ensure(families, nodeAddress);
  }

  /** Pod traffic leaving the cluster is masqueraded: to anything but another Node or a pod of any Node. */
  async syncPodEgress(nodes: readonly V1Node[], families: readonly IpFamily[]): Promise<void> {
    const allPodCidrs = nodes.flatMap((n) => tryOr(() => nodePodCidrs(n), []));
    const allAddresses = nodes.flatMap((n) => tryOr(() => Object.values(nodeAddresses(n).byFamily), []));
    await this.#podEgress.ensure(allPodCidrs, allAddresses, families);
  }
}

/** Removes what the controller leaves on a node besides gobgpd itself: the pod egress rule and its sets. */
export async function removePodEgress(runner: CommandRunner, netns?: string): Promise<void> {
  await new PodEgress({ runner, ...(netns && { netns }) }).remove();
}

/** A Node that does not read contributes nothing to the egress sets; its own problems are reported by other stages. */
function tryOr<T>(f: () => T, fallback: T): T {
  try {
    return f();
  } catch {
    return fallback;
  }
}
