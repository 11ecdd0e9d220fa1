import { SyncFailures } from '@kube-router/controller';
import { Iptables, type CommandRunner, type IpFamily, type IpRoute2 } from '@kube-router/netfilter';
import { KUBE_BRIDGE, nodeLink } from './pod-network.js';

/**
 * kube-router's FORWARD rules for pod traffic (its routing controller's enableForwarding), by the same comments and
 * arguments, so that an agent replacing kube-router finds and keeps its rules instead of adding a second set. The
 * node interface's rule only when that interface is known.
 */
export function forwardRules(nodeInterface: string | undefined): string[][] {
  return [
    ['-m', 'comment', '--comment', 'allow outbound traffic from pods', '-i', KUBE_BRIDGE, '-j', 'ACCEPT'],
    ['-m', 'comment', '--comment', 'allow inbound traffic to pods', '-o', KUBE_BRIDGE, '-j', 'ACCEPT'],
    ...(nodeInterface === undefined
      ? []
      : [['-m', 'comment', '--comment', 'allow outbound node port traffic on node interface with which node ip is associated', '-o', nodeInterface, '-j', 'ACCEPT']]),
  ];
}

/** br_netfilter's switches: without them, traffic between pods on kube-bridge never reaches iptables or NetworkPolicy. */
export const BRIDGE_NF_SYSCTLS: Record<IpFamily, string> = {
  ipv4: 'net.bridge.bridge-nf-call-iptables',
  ipv6: 'net.bridge.bridge-nf-call-ip6tables',
};

export interface PodForwardingOptions {
  readonly runner: CommandRunner;
  readonly ip: IpRoute2;
  readonly netns?: string | undefined;
}

/**
 * What lets pod traffic through a node whose FORWARD policy drops (Docker's, many distributions'): kube-router's
 * ACCEPT rules for kube-bridge and the node's interface, and bridged traffic handed to iptables.
 */
export class PodForwarding {
  readonly #options: PodForwardingOptions;
  readonly #iptables: Record<IpFamily, Iptables>;

  constructor(options: PodForwardingOptions) {
    this.#options = options;
    const { runner, netns } = options;
    this.#iptables = {
      ipv4: new Iptables({ runner, family: 'ipv4', ...(netns && { netns }) }),
      ipv6: new Iptables({ runner, family: 'ipv6', ...(netns && { netns }) }),
    };
  }

  /** Each family this node routes pods of; failures joined as `forward-rules/<family>` and `bridge-netfilter`. */
  async ensure(families: readonly IpFamily[], nodeAddress: string): Promise<void> {
    const failures = new SyncFailures();
    const nodeInterface = (await failures.attempt('node-interface', () => nodeLink(this.#options.ip, nodeAddress)))?.ifname;
    for (const family of families) {
      await failures.attempt(`forward-rules/${family}`, async () => {
        const iptables = this.#iptables[family];
        // kube-router inserts them as rule 1. Appended instead: a NetworkPolicy jump must stay ahead of them, and the
        // netpol controller puts a misplaced jump back only at its next periodic sync.
        for (const rule of forwardRules(nodeInterface)) {
          if (!(await iptables.hasRule('filter', 'FORWARD', rule))) await iptables.run(['-t', 'filter', '-A', 'FORWARD', ...rule]);
        }
      });
    }
    if (families.length > 0) await failures.attempt('bridge-netfilter', () => this.#bridgeNetfilter(families));
    failures.throwIfAny('pod forwarding');
  }

  async #bridgeNetfilter(families: readonly IpFamily[]): Promise<void> {
    const assignments = families.map((family) => `${BRIDGE_NF_SYSCTLS[family]}=1`);
    try {
      await this.#run('sysctl', ['-q', '-w', ...assignments]);
    } catch (error) {
      // No /proc/sys/net/bridge: br_netfilter is not loaded, which kube-router loads at start.
      try {
        await this.#run('modprobe', ['br_netfilter']);
      } catch (modprobe) {
        throw new AggregateError(
          [error, modprobe],
          `br_netfilter: bridged pod traffic bypasses iptables and NetworkPolicy: ${(error as Error).message}; modprobe br_netfilter: ${(modprobe as Error).message}`,
          { cause: modprobe },
        );
      }
      await this.#run('sysctl', ['-q', '-w', ...assignments]);
    }
  }

  async #run(command: string, args: string[]): Promise<void> {
    const { netns } = this.#options;
    await this.#options.runner.run({ command, args, timeoutMs: 10_000, ...(netns !== undefined && { netns }) });
  }
}
