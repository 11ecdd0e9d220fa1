import { Iptables, Ipset, ipsetNetElements, type CommandRunner, type IpFamily } from '@kube-router/netfilter';
import { SyncFailures } from '@kube-router/controller';

/** kube-router's set names: every Node's pod CIDRs and every Node's addresses; IPv6 sets carry the `inet6:` prefix. */
export const POD_SUBNETS_IPSET = 'kube-router-pod-subnets';
export const NODE_ADDRESSES_IPSET = 'kube-router-node-ips';
const FAMILIES: readonly IpFamily[] = ['ipv4', 'ipv6'];

const setName = (base: string, family: IpFamily) => (family === 'ipv6' ? `inet6:${base}` : base);
/** Temporary names for atomic swaps; within ipset's 31 characters even with the inet6: prefix. */
const tempName = (base: string, family: IpFamily) => `${family === 'ipv6' ? 'inet6:' : ''}${base.replace('kube-router-', 'kr-')}-tmp`;

/**
 * kube-router's pod egress rule (nat POSTROUTING): traffic from a pod to anything that is neither a pod nor a node
 * leaves masqueraded to the node's address, with `--random-fully` where iptables has it (as kube-router adds it).
 * Same arguments and sets as kube-router, so an agent that replaces kube-router adopts its rule rather than adding a
 * second one.
 */
export function podEgressRule(family: IpFamily, randomFully: boolean): string[] {
  return [
    '-m', 'set', '--match-set', setName(POD_SUBNETS_IPSET, family), 'src',
    '-m', 'set', '!', '--match-set', setName(POD_SUBNETS_IPSET, family), 'dst',
    '-m', 'set', '!', '--match-set', setName(NODE_ADDRESSES_IPSET, family), 'dst',
    '-j', 'MASQUERADE',
    ...(randomFully ? ['--random-fully'] : []),
  ];
}

/** kube-router's earlier pod egress rule, without the node-ips match: removed wherever it is found. */
function oldPodEgressRule(family: IpFamily): string[] {
  return ['-m', 'set', '--match-set', setName(POD_SUBNETS_IPSET, family), 'src', '-m', 'set', '!', '--match-set', setName(POD_SUBNETS_IPSET, family), 'dst', '-j', 'MASQUERADE'];
}

export interface PodEgressOptions {
  runner: CommandRunner;
  netns?: string;
}

export class PodEgress {
  readonly #iptables: Record<IpFamily, Iptables>;
  readonly #ipset: Ipset;

  constructor(options: PodEgressOptions) {
    const { runner, netns } = options;
    this.#iptables = {
      ipv4: new Iptables({ runner, family: 'ipv4', ...(netns && { netns }) }),
      ipv6: new Iptables({ runner, family: 'ipv6', ...(netns && { netns }) }),
    };
    this.#ipset = new Ipset({ runner, ...(netns && { netns }) });
  }

  /** Fills both families' sets and ensures the rule of each family this node routes pods of. */
  async ensure(podCidrs: readonly string[], nodeAddresses: readonly string[], families: readonly IpFamily[]): Promise<void> {
    const failures = new SyncFailures();
    for (const family of FAMILIES) {
      const inFamily = (value: string) => value.includes(':') === (family === 'ipv6');
      await failures.attempt(`pod-egress/${family}`, async () => {
        await this.#ipset.replace(
          { name: setName(POD_SUBNETS_IPSET, family), type: 'hash:net', family },
          podCidrs.filter(inFamily).flatMap(ipsetNetElements),
          tempName(POD_SUBNETS_IPSET, family),
        );
        await this.#ipset.replace(
          { name: setName(NODE_ADDRESSES_IPSET, family), type: 'hash:ip', family },
          nodeAddresses.filter(inFamily),
          tempName(NODE_ADDRESSES_IPSET, family),
        );
        if (!families.includes(family)) return;
        const iptables = this.#iptables[family];
        const randomFully = await iptables.hasRandomFully();
        const rule = podEgressRule(family, randomFully);
        if (!(await iptables.hasRule('nat', 'POSTROUTING', rule))) await iptables.run(['-t', 'nat', '-A', 'POSTROUTING', ...rule]);
        // What kube-router's deleteBadPodEgressRules removes: its old rule without the node-ips match (it masqueraded
        // traffic to other nodes), and the form without --random-fully where iptables has it (two rules would
        // masquerade differently).
        await deleteEvery(iptables, oldPodEgressRule(family));
        if (randomFully) await deleteEvery(iptables, podEgressRule(family, false));
      });
    }
    failures.throwIfAny('pod egress');
  }

  /** Removes the rules (every copy) and the sets; nothing to remove is not an error. */
  async remove(): Promise<void> {
    const failures = new SyncFailures();
    for (const family of FAMILIES) {
      await failures.attempt(`pod-egress/${family}`, async () => {
        const iptables = this.#iptables[family];
        for (const rule of [podEgressRule(family, true), podEgressRule(family, false), oldPodEgressRule(family)]) await deleteEvery(iptables, rule);
        const existing = new Set(await this.#ipset.listNames());
        for (const base of [POD_SUBNETS_IPSET, NODE_ADDRESSES_IPSET]) {
          for (const name of [setName(base, family), tempName(base, family)]) {
            if (existing.has(name)) await this.#ipset.destroy(name);
          }
        }
      });
    }
    failures.throwIfAny('pod egress cleanup');
  }
}

/** Deletes every copy of a nat POSTROUTING rule; none is not an error. */
async function deleteEvery(iptables: Iptables, rule: readonly string[]): Promise<void> {
  // -C fails with 2 when a set of the rule does not exist (or the flag is unknown): then there is no such rule either.
  while ((await iptables.run(['-t', 'nat', '-C', 'POSTROUTING', ...rule], [1, 2])).exitCode === 0) {
    await iptables.run(['-t', 'nat', '-D', 'POSTROUTING', ...rule]);
  }
}
