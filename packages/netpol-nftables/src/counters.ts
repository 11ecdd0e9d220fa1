import type { NftRuleset } from '@kube-router/netfilter';
import { POD_CHAIN_PREFIX, POLICY_CHAIN_PREFIX, TAIL_CHAIN } from '@kube-router/netpol';
import type { ChainVerdictCounter, IpFamily } from '@kube-router/netpol';

const POLICY_CHAIN = new RegExp(`^${POLICY_CHAIN_PREFIX}[0-9A-F]{16}$`);
const POD_CHAIN = new RegExp(`^${POD_CHAIN_PREFIX}[0-9A-F]{16}$`);

/**
 * The verdict counters of one family's table as `nft -j list table` shows them: the `counter` statements the render
 * puts in a policy chain's accepting rules, in a pod chain's `reject` and in the tail chain's `reject`s (by
 * direction: a rule that first matches a source address is from the pods, egress). Rules without a counter are left
 * out (a table written by a version before the counters: `counter` changed the chains' rule text, so their digests, and
 * the first sync after the upgrade writes them again). A rule's handle is its generation: a chain written again has
 * new rules, whose counters start at zero. Reads rules only: the listing may be terse (`-t`, no set elements).
 */
export function verdictCountersOf(ruleset: NftRuleset, family: IpFamily): ChainVerdictCounter[] {
  const counters: ChainVerdictCounter[] = [];
  for (const rule of ruleset.rules) {
    const kind = POLICY_CHAIN.test(rule.chain) ? 'policy' : POD_CHAIN.test(rule.chain) ? 'pod' : rule.chain === TAIL_CHAIN ? 'tail' : undefined;
    if (kind === undefined) continue;
    const counted = counterOf(rule.expr);
    if (!counted) continue;
    if (kind === 'policy') {
      counters.push({ family, chain: rule.chain, verdict: 'allow', generation: rule.handle, ...counted });
    } else if (rule.expr.some((expression) => isObject(expression) && 'reject' in expression)) {
      const direction = kind === 'tail' ? (firstAddressField(rule.expr) === 'saddr' ? 'egress' : 'ingress') : undefined;
      counters.push({ family, chain: rule.chain, verdict: 'reject', ...(direction && { direction }), generation: rule.handle, ...counted });
    }
  }
  return counters;
}

function counterOf(expressions: readonly unknown[]): { packets: number; bytes: number } | undefined {
  for (const expression of expressions) {
    if (!isObject(expression) || !isObject(expression.counter)) continue;
    return { packets: Number(expression.counter.packets ?? 0), bytes: Number(expression.counter.bytes ?? 0) };
  }
  return undefined;
}

/** `saddr` or `daddr` of the rule's first payload match. */
function firstAddressField(expressions: readonly unknown[]): string | undefined {
  for (const expression of expressions) {
    if (!isObject(expression) || !isObject(expression.match) || !isObject(expression.match.left)) continue;
    const payload = expression.match.left.payload;
    if (isObject(payload) && (payload.field === 'saddr' || payload.field === 'daddr')) return payload.field;
  }
  return undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
