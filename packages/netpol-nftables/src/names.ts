import { createHash } from 'node:crypto';
import type { Direction, IpFamily } from '@kube-router/netpol';

/** kube-router's tables: one per family, so that each family can be replaced or removed alone. */
export const TABLES: Readonly<Record<IpFamily, { readonly family: 'ip' | 'ip6'; readonly name: string }>> = {
  ipv4: { family: 'ip', name: 'kube-router-filter-ipv4' },
  ipv6: { family: 'ip6', name: 'kube-router-filter-ipv6' },
};

/** Base chains, one per hook, at filter priority. */
export const TOP_CHAINS = {
  input: 'KUBE-ROUTER-INPUT',
  forward: 'KUBE-ROUTER-FORWARD',
  output: 'KUBE-ROUTER-OUTPUT',
} as const;
export type Hook = keyof typeof TOP_CHAINS;
export const HOOKS = Object.keys(TOP_CHAINS) as Hook[];

/** Stateful rules every pod chain runs first (invalid drop, established accept, ICMP). */
export const COMMON_CHAIN = 'KUBE-NWPLCY-COMMON';
/** Marks a packet as allowed by a policy; rules that allow everything go to it. */
export const DEFAULT_CHAIN = 'KUBE-NWPLCY-DEFAULT';
/** The end of every base chain: the --netpol-default-deny rejects, then the accept of packets a pod chain passed. */
export const TAIL_CHAIN = 'KUBE-NWPLCY-TAIL';
/** Addresses of local pods whose rules are programmed; --netpol-default-deny rejects the rest of the pod CIDRs. */
export const LOCAL_PODS_SET = 'kube-router-local-pods';
/** Pod address → its ingress / egress chain: the dispatch, one rule per base chain however many pods there are. */
export const INGRESS_MAP = 'kube-router-pod-ingress';
export const EGRESS_MAP = 'kube-router-pod-egress';

export const POD_CHAIN_PREFIX = 'KUBE-POD-FW-';
export const POLICY_CHAIN_PREFIX = 'KUBE-NWPLCY-';
export const SOURCE_SET_PREFIX = 'KUBE-SRC-';
export const DESTINATION_SET_PREFIX = 'KUBE-DST-';

/** Set by a policy rule that allows the packet; cleared again by the pod chain. */
export const POLICY_MARK = 0x10000;
/** Set by a pod chain that let the packet through; the tail accepts packets carrying it. */
export const ACCEPT_MARK = 0x20000;
export const NFLOG_GROUP = 100;

/**
 * Names come from what an object is (policy id or pod key, direction, family, role), never from its content, so
 * that they stay the same across syncs and restarts and a restarted agent finds its own objects in place. The hashes
 * are those of the iptables backend, so both name a pod's or a policy's chain alike.
 */
export function stableHash(...parts: readonly (string | number)[]): string {
  return createHash('sha256').update(parts.join('\0')).digest('hex').slice(0, 16).toUpperCase();
}

export function podChainName(podId: string, direction: Direction, family: IpFamily): string {
  return `${POD_CHAIN_PREFIX}${stableHash('pod', podId, direction, family)}`;
}

export function policyChainName(policyId: string, direction: Direction, family: IpFamily): string {
  return `${POLICY_CHAIN_PREFIX}${stableHash('policy', policyId, direction, family)}`;
}

/** What one rule's set holds: peer pods, its ipBlocks (an interval set), or its named ports (address . proto . port). */
export type RuleSetRole = 'pods' | 'ipblocks' | 'named-ports';

/**
 * A set of one rule. `ruleKey` is what the rule matches besides its peers and its position (see ruleSetKey), so that
 * a reordered or rewritten rule never takes over another rule's set while the old chain still pairs it with old ports.
 */
export function ruleSetName(policyId: string, direction: Direction, ruleKey: string, role: RuleSetRole, family: IpFamily): string {
  const prefix = direction === 'ingress' && role !== 'named-ports' ? SOURCE_SET_PREFIX : DESTINATION_SET_PREFIX;
  return `${prefix}${stableHash('nft', role, policyId, direction, ruleKey, family)}`;
}

export function ruleSetKey(rule: {
  index: number;
  allPorts: boolean;
  ports: readonly { protocol: string; port?: number; endPort?: number }[];
  namedPorts: readonly { name: string; protocol: string }[];
}): string {
  const ports = rule.ports.map((p) => `${p.protocol}:${p.port ?? ''}-${p.endPort ?? ''}`);
  const named = rule.namedPorts.map((p) => `${p.protocol}:${p.name}`);
  return `${rule.index}|${rule.allPorts ? 'all' : [...ports, ...named].sort().join(',')}`;
}

const HASHED = '[0-9A-F]{16}';
const OWN_CHAIN = new RegExp(
  `^(?:${[...Object.values(TOP_CHAINS), COMMON_CHAIN, DEFAULT_CHAIN, TAIL_CHAIN].join('|')}|${POD_CHAIN_PREFIX}${HASHED}|${POLICY_CHAIN_PREFIX}${HASHED})$`,
);
const OWN_SET = new RegExp(`^(?:(?:${SOURCE_SET_PREFIX}|${DESTINATION_SET_PREFIX})${HASHED}|${LOCAL_PODS_SET}|${INGRESS_MAP}|${EGRESS_MAP})$`);

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
