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
