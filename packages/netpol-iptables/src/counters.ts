import { parseIptablesSave } from '@kube-router/netfilter';
import type { SavedTable } from '@kube-router/netfilter';
import { DEFAULT_CHAIN, POD_CHAIN_PREFIX, POLICY_CHAIN_PREFIX, TAIL_CHAIN } from '@kube-router/netpol';
import type { ChainVerdictCounter, IpFamily } from '@kube-router/netpol';

const POLICY_CHAIN = new RegExp(`^${POLICY_CHAIN_PREFIX}[0-9A-F]{16}$`);
const POD_CHAIN = new RegExp(`^${POD_CHAIN_PREFIX}[0-9A-F]{16}$`);
/** A counted rule (`iptables-save -c`) of a chain named like ours: the tail chain has the policy chains' prefix. */
const OWN_COUNTED_RULE = new RegExp(`^\\[\\d+:\\d+\\] -A (?:${POLICY_CHAIN_PREFIX}|${POD_CHAIN_PREFIX})`);

/**
 * verdictCountersOf the text of `iptables-save -c -t filter`, of which only our chains' rules are parsed: the table
 * also holds every other tool's rules (kube-proxy's can be tens of thousands), and a scrape parses it on the event loop.
 */
export function verdictCountersOfSave(text: string, family: IpFamily): ChainVerdictCounter[] {
  const lines = text.split('\n').filter((line) => line.startsWith('*') || line === 'COMMIT' || OWN_COUNTED_RULE.test(line));
  const filter = parseIptablesSave(lines.join('\n')).find((table) => table.name === 'filter');
  return filter ? verdictCountersOf(filter, family) : [];
}

/**
 * The verdict counters of our chains in a filter table saved with `-c`: in a policy chain the rules that mark what
 * the policy allows (`-j MARK`, or the jump to the default chain; the `RETURN` after each only sees what the mark
 * rule counted already), in a pod chain its `REJECT`, in the tail chain (--netpol-default-deny) its `REJECT`s by
 * direction (`-s <pod CIDR>` is from the pods, egress). Every other chain and rule is left out.
 */
export function verdictCountersOf(table: SavedTable, family: IpFamily): ChainVerdictCounter[] {
  const counters: ChainVerdictCounter[] = [];
  for (const chain of table.chains) {
    const kind = POLICY_CHAIN.test(chain.name) ? 'policy' : POD_CHAIN.test(chain.name) ? 'pod' : chain.name === TAIL_CHAIN ? 'tail' : undefined;
    if (kind === undefined) continue;
    for (const rule of chain.rules) {
      if (!rule.counters) continue;
      const { packets, bytes } = rule.counters;
      if (kind === 'policy') {
        if (rule.target === 'MARK' || rule.target === DEFAULT_CHAIN) counters.push({ family, chain: chain.name, verdict: 'allow', packets, bytes });
      } else if (rule.target === 'REJECT') {
        const direction = kind === 'tail' ? (rule.args.includes('-s') ? 'egress' : 'ingress') : undefined;
        counters.push({ family, chain: chain.name, verdict: 'reject', ...(direction && { direction }), packets, bytes });
      }
    }
  }
  return counters;
}
