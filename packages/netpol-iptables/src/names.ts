import { DESTINATION_SET_PREFIX, SOURCE_SET_PREFIX, TOP_CHAINS as BY_HOOK, ownChainPattern, ownSetPattern, stableHash } from '@kube-router/netpol';
import type { Direction, IpFamily } from '@kube-router/netpol';

/** Top-level chains (kube-router's, by hook), jumped to from the built-in chain of the same role. */
export const TOP_CHAINS = { INPUT: BY_HOOK.input, FORWARD: BY_HOOK.forward, OUTPUT: BY_HOOK.output } as const;
export type BuiltinChain = keyof typeof TOP_CHAINS;
export const BUILTIN_CHAINS = Object.keys(TOP_CHAINS) as BuiltinChain[];

/** kube-router's names of the local pods set; IPv6 sets carry the `inet6:` prefix as kube-router's do. */
export const LOCAL_PODS_SETS: Readonly<Record<IpFamily, string>> = {
  ipv4: 'kube-router-local-pods',
  ipv6: 'inet6:kube-router-local-pods',
};
/** Filled and swapped in for each set replacement, destroyed right after. */
export const TEMP_SET = 'KUBE-TMP-NETPOL';

/** Set by a policy rule that allows the packet; cleared again by the pod chain. */
export const POLICY_MARK = '0x10000/0x10000';
/** Set by a pod chain that let the packet through; the top-level chains accept packets carrying it. */
export const ACCEPT_MARK = '0x20000/0x20000';

/** The policy's local target pods. */
export function targetSetName(policyId: string, family: IpFamily): string {
  return `${DESTINATION_SET_PREFIX}${stableHash('targets', policyId, family)}`;
}

/**
 * What a rule matches besides its peers (its ports), with its position: the key of the rule's peer and ipBlock sets.
 * Two rules that differ in what they match never share a set name, so when rules are removed or reordered a set
 * never takes on another rule's peers while the old chain still pairs it with the old ports.
 */
/** Peer pods of one rule (see ruleSetKey): sources for ingress, destinations for egress. */
export function peerPodSetName(policyId: string, direction: Direction, ruleKey: string, family: IpFamily): string {
  const prefix = direction === 'ingress' ? SOURCE_SET_PREFIX : DESTINATION_SET_PREFIX;
  return `${prefix}${stableHash('peer-pods', policyId, direction, ruleKey, family)}`;
}

/**
 * One ipBlock of one rule (a set each, so that one block's excepts cannot shadow another block), named by its CIDR
 * too: a block whose CIDR changes gets a new set rather than new members under an old rule.
 */
export function ipBlockSetName(
  policyId: string,
  direction: Direction,
  ruleKey: string,
  cidr: string,
  family: IpFamily,
): string {
  const prefix = direction === 'ingress' ? SOURCE_SET_PREFIX : DESTINATION_SET_PREFIX;
  return `${prefix}${stableHash('ipblock', policyId, direction, ruleKey, cidr, family)}`;
}

/** The destinations of one named-port entry of one rule. */
export function namedPortSetName(
  policyId: string,
  direction: Direction,
  rule: number,
  entry: string,
  family: IpFamily,
): string {
  return `${DESTINATION_SET_PREFIX}${stableHash('named-port', policyId, direction, rule, entry, family)}`;
}

const OWN_CHAIN = ownChainPattern();
const OWN_SET = ownSetPattern([TEMP_SET, ...Object.values(LOCAL_PODS_SETS)]);

/** Only names this plugin makes (ownChainPattern): a prefix alone would claim other controllers' chains. */
export function isOwnChain(name: string): boolean {
  return OWN_CHAIN.test(name);
}

export function isOwnSet(name: string): boolean {
  return OWN_SET.test(name);
}
