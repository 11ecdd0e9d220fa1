import { hash as digest } from 'node:crypto';
import type { Direction, IpFamily } from '../model.js';

// kube-router's names, the same on both backends, so that a pod's or a policy's chain is named alike on either.

/** Stateful rules every pod chain runs first (invalid drop, established accept, ICMP). */
export const COMMON_CHAIN = 'KUBE-NWPLCY-COMMON';
/** Marks a packet as allowed by a policy; the target of rules that allow everything. */
export const DEFAULT_CHAIN = 'KUBE-NWPLCY-DEFAULT';
/** The end of the top-level chains: the --netpol-default-deny rejects, then the accept of what a pod chain passed. */
export const TAIL_CHAIN = 'KUBE-NWPLCY-TAIL';
export const POD_CHAIN_PREFIX = 'KUBE-POD-FW-';
export const POLICY_CHAIN_PREFIX = 'KUBE-NWPLCY-';
export const SOURCE_SET_PREFIX = 'KUBE-SRC-';
export const DESTINATION_SET_PREFIX = 'KUBE-DST-';
/**
 * kube-router's top-level chains, one per hook: jumped to from the built-in chain of the same name (iptables), or
 * base chains of their own (nftables).
 */
export const TOP_CHAINS = { input: 'KUBE-ROUTER-INPUT', forward: 'KUBE-ROUTER-FORWARD', output: 'KUBE-ROUTER-OUTPUT' } as const;
export type Hook = keyof typeof TOP_CHAINS;
/** Where dropped packets are logged (rate-limited) before the reject. */
export const NFLOG_GROUP = 100;

const hashes = new Map<string, string>();
/** Bounds the memo only so that a churning cluster cannot grow it forever. */
const MAX_CACHED_HASHES = 200_000;

/**
 * Names come from what an object is (policy id or pod key, direction, family, role), never from its content, so
 * that they stay the same across syncs and restarts and a restarted agent finds its own objects in place: 16 hex
 * digits of SHA-256 over the parts. Remembered, because every sync names every pod and policy chain again, and a
 * hash per name each time made an event's sync grow with the number of unrelated policies.
 */
export function stableHash(...parts: readonly (string | number)[]): string {
  const key = parts.join('\0');
  let hash = hashes.get(key);
  if (hash === undefined) {
    hash = digest('sha256', key, 'hex').slice(0, 16).toUpperCase();
    if (hashes.size >= MAX_CACHED_HASHES) hashes.clear();
    hashes.set(key, hash);
  }
  return hash;
}

export function podChainName(podId: string, direction: Direction, family: IpFamily): string {
  return `${POD_CHAIN_PREFIX}${stableHash('pod', podId, direction, family)}`;
}

export function policyChainName(policyId: string, direction: Direction, family: IpFamily): string {
  return `${POLICY_CHAIN_PREFIX}${stableHash('policy', policyId, direction, family)}`;
}

/**
 * What a rule's sets are keyed by besides the policy, direction and role: its position and ports, never its peers,
 * so that a reordered or rewritten rule never takes over another rule's set while the old chain still pairs it with
 * old ports.
 */
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

/** The hash part of a name (stableHash). */
const HASHED = '[0-9A-F]{16}';

/**
 * The chains a backend owns, by exact name: the top-level chains, the common, default and tail chains, and pod and
 * policy chains (and `hashedPrefixes`' chains) followed by a hash. Never a prefix alone: that would claim other
 * controllers' chains (kube-router's proxy keeps KUBE-ROUTER-SERVICES in the filter table) and delete them as stale.
 */
export function ownChainPattern(hashedPrefixes: readonly string[] = []): RegExp {
  const hashed = [POD_CHAIN_PREFIX, POLICY_CHAIN_PREFIX, ...hashedPrefixes].map((prefix) => `${literal(prefix)}${HASHED}`);
  const exact = [...Object.values(TOP_CHAINS), COMMON_CHAIN, DEFAULT_CHAIN, TAIL_CHAIN].map(literal);
  return new RegExp(`^(?:${[...exact, ...hashed].join('|')})$`);
}

/** The sets a backend owns: source and destination sets followed by a hash, and `fixed` by their exact names. */
export function ownSetPattern(fixed: readonly string[]): RegExp {
  const hashed = `(?:${literal(SOURCE_SET_PREFIX)}|${literal(DESTINATION_SET_PREFIX)})${HASHED}`;
  return new RegExp(`^(?:${[hashed, ...fixed.filter((name) => name !== '').map(literal)].join('|')})$`);
}

/** A name as a regular expression that matches it alone. */
function literal(name: string): string {
  return name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
