import { createHash } from 'node:crypto';
import type { IpFamily } from '@kube-router/netfilter';

/**
 * The proxy's tables: one per family, ours alone. The names differ from netpol-nftables' `kube-router-filter-ipv4/6`
 * and from kube-proxy's `kube-proxy`, so that neither is ever touched by this plugin.
 */
export const TABLES: Readonly<Record<IpFamily, { readonly family: 'ip' | 'ip6'; readonly name: string }>> = {
  ipv4: { family: 'ip', name: 'kube-router-proxy' },
  ipv6: { family: 'ip6', name: 'kube-router-proxy' },
};

// kube-router's Service annotations are read by both proxies: they live in @kube-router/kube.
export { SERVICE_ANNOTATIONS as ANNOTATIONS } from '@kube-router/kube';

/** Fixed chains, sets and maps (kube-proxy's nftables layout and names). */
export const CHAINS = {
  filterPrerouting: 'filter-prerouting',
  filterInput: 'filter-input',
  filterForward: 'filter-forward',
  filterOutput: 'filter-output',
  natPrerouting: 'nat-prerouting',
  natOutput: 'nat-output',
  natPostrouting: 'nat-postrouting',
  services: 'services',
  masquerading: 'masquerading',
  markForMasquerade: 'mark-for-masquerade',
  endpointsCheck: 'service-endpoints-check',
  firewallCheck: 'firewall-check',
  reject: 'reject-chain',
  // After source NAT (whose hooks put the Service address back on replies): where replies are counted per Service.
  countersInput: 'counters-input',
  countersPostrouting: 'counters-postrouting',
} as const;

export const MAPS = {
  serviceIps: 'service-ips',
  serviceNodePorts: 'service-nodeports',
  noEndpointServices: 'no-endpoint-services',
  noEndpointNodePorts: 'no-endpoint-nodeports',
  firewallIps: 'firewall-ips',
  // Service address . protocol . port → named counter: kube-router's per-Service traffic series.
  connectionCounters: 'service-connection-counters',
  inCounters: 'service-in-counters',
  outCounters: 'service-out-counters',
} as const;

/** The maps whose values are named counters (quoted in scripts), not verdicts. */
export const COUNTER_MAPS: ReadonlySet<string> = new Set([MAPS.connectionCounters, MAPS.inCounters, MAPS.outCounters]);

/** Prefixes of the named counters of a Service address (`counter` objects: a namespace of their own, apart from chains). */
export const COUNTER_PREFIX = {
  connections: 'connections-',
  in: 'in-',
  out: 'out-',
} as const;

export type CounterKind = keyof typeof COUNTER_PREFIX;

export type MapName = (typeof MAPS)[keyof typeof MAPS];

export const NODEPORT_IPS_SET = 'nodeport-ips';

/** The packet mark that asks nat-postrouting to masquerade (kube-proxy's default masquerade bit 14). */
export const MASQUERADE_MARK = '0x00004000';

/** Prefixes of the per-Service chains and sets; each carries a slash, which no fixed chain has. */
export const PREFIX = {
  cluster: 'service-',
  local: 'local-',
  external: 'external-',
  endpoint: 'endpoint-',
  firewall: 'firewall-',
  affinity: 'affinity-',
} as const;

/**
 * A stable name from its parts, kube-proxy's hashAndTruncate: an 8-character base32 hash of the name first, so that a
 * name is unique even when truncated and names differing in one digit are told apart at a glance. A restart computes
 * the same names and so adopts the chains it wrote.
 */
export function hashedName(prefix: string, base: string): string {
  const hash = base32(createHash('sha256').update(base).digest()).slice(0, 8);
  const name = `${prefix}${hash}-${base}`;
  return name.length > 255 ? `${name.slice(0, 252)}...` : name;
}

/** `namespace/name/protocol/portName`, the base of a Service port's chain names. */
export function servicePortBase(owner: string, protocol: string, portName: string): string {
  return `${owner}/${protocol}/${portName}`;
}

/** `…__address/port`, the base of an endpoint's chain name; an IPv6 address's colons become dots (not allowed in names). */
export function endpointBase(servicePort: string, address: string, port: number): string {
  return `${servicePort}__${address.replaceAll(':', '.')}/${port}`;
}

/** Chains and sets of Services carry a `/` in their name; the fixed ones never do. */
export function isServiceObjectName(name: string): boolean {
  return name.includes('/');
}

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

function base32(bytes: Buffer): string {
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}
