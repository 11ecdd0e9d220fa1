import { DESTINATION_SET_PREFIX, POD_CHAIN_PREFIX, SOURCE_SET_PREFIX, TOP_CHAINS, ownChainPattern, ownSetPattern, stableHash } from '@kube-router/netpol';
import type { Direction, IpFamily } from '@kube-router/netpol';

/** kube-router's tables: one per family, so that each family can be replaced or removed alone. */
export const TABLES: Readonly<Record<IpFamily, { readonly family: 'ip' | 'ip6'; readonly name: string }>> = {
  ipv4: { family: 'ip', name: 'kube-router-filter-ipv4' },
  ipv6: { family: 'ip6', name: 'kube-router-filter-ipv6' },
};

/** Base chains, one per hook, at filter priority: kube-router's top-level chains. */
export { TOP_CHAINS };

/** Addresses of local pods whose rules are programmed; --netpol-default-deny rejects the rest of the pod CIDRs. */
export const LOCAL_PODS_SET = 'kube-router-local-pods';
/** Pod address → its ingress / egress chain: the dispatch, one rule per base chain however many pods there are. */
export const INGRESS_MAP = 'kube-router-pod-ingress';
export const EGRESS_MAP = 'kube-router-pod-egress';

/** Set by a policy rule that allows the packet; cleared again by the pod chain. */
export const POLICY_MARK = 0x10000;
/** Set by a pod chain that let the packet through; the tail accepts packets carrying it. */
export const ACCEPT_MARK = 0x20000;

/**
 * The set of a rule's peer pods. It is named by what selects them (`RulePeers.podsKey`), not by its rule: every rule of
 * any policy with the same selectors shares it, so a pod event changes one set however many policies select its
 * pods alike, and the tables hold a set per distinct selection rather than per rule (each set in the namespace adds
 * to what every `nft -f` reads before it writes).
 */
export function peerPodsSetName(direction: Direction, podsKey: string, family: IpFamily): string {
  return `${setPrefix(direction)}${stableHash('nft', 'pods', podsKey, direction, family)}`;
}

/**
 * The interval set of a rule's ipBlocks, named by its elements: they change only with the policy, so rules with the
 * same ipBlocks share it and a changed ipBlock is a new set (the old one goes once nothing refers to it).
 */
export function ipBlockSetName(direction: Direction, elements: readonly string[], family: IpFamily): string {
  return `${setPrefix(direction)}${stableHash('nft', 'ipblocks', direction, family, ...elements)}`;
}

/**
 * The named-port destinations of one rule (address . proto . port). `ruleKey` is what the rule matches besides its
 * peers and its position (see ruleSetKey), so that a reordered or rewritten rule never takes over another rule's set
 * while the old chain still pairs it with old ports.
 */
export function namedPortsSetName(policyId: string, direction: Direction, ruleKey: string, family: IpFamily): string {
  return `${DESTINATION_SET_PREFIX}${stableHash('nft', 'named-ports', policyId, direction, ruleKey, family)}`;
}

/**
 * The chain of an address that several local pods hold at once (a pod object not yet gone beside the pod that got
 * its address again): it runs each one's pod chain in turn, so that traffic must pass every one's policies, as the
 * iptables backend's jump rules, one per pod, make it. A dispatch map holds one verdict per address.
 */
export const SHARED_ADDRESS_CHAIN_PREFIX = `${POD_CHAIN_PREFIX}ADDR-`;

export function sharedAddressChainName(address: string, direction: Direction, family: IpFamily): string {
  return `${SHARED_ADDRESS_CHAIN_PREFIX}${stableHash('nft', 'shared-address', address, direction, family)}`;
}

function setPrefix(direction: Direction): string {
  return direction === 'ingress' ? SOURCE_SET_PREFIX : DESTINATION_SET_PREFIX;
}

const OWN_CHAIN = ownChainPattern([SHARED_ADDRESS_CHAIN_PREFIX]);
const OWN_SET = ownSetPattern([LOCAL_PODS_SET, INGRESS_MAP, EGRESS_MAP]);

/** The tables are ours alone, but a name we do not make is still left alone: someone put it there on purpose. */
export function isOwnChain(name: string): boolean {
  return OWN_CHAIN.test(name);
}

export function isOwnSet(name: string): boolean {
  return OWN_SET.test(name);
}

export function isPodChain(name: string): boolean {
  return name.startsWith(POD_CHAIN_PREFIX);
}

/**
 * The order stale chains are deleted in, within one transaction: a chain before the chains it jumps to (shared
 * address chains jump to pod chains, pod chains to policy chains), as the kernel refuses to delete a chain in use.
 */
export function staleChainRank(name: string): number {
  if (name.startsWith(SHARED_ADDRESS_CHAIN_PREFIX)) return 0;
  return isPodChain(name) ? 1 : 2;
}
