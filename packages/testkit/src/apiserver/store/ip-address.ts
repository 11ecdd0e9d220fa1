import { isIPv4, isIPv6 } from 'node:net';

export type IpFamily = 'IPv4' | 'IPv6';

/**
 * The family of an address as kube-apiserver reads it (Go's net/netip), undefined for text that is none: IPv4 only
 * as four decimal parts without leading zeros, IPv6 without a zone. ipaddr.js's lenient parse takes `010.0.0.1` as
 * octal 8.0.0.1 and keeps `fe80::1%eth0`, which a real API server refuses and no dataplane can program.
 * (@kube-router/kube's parseIp reads addresses the same way; testkit cannot import it, kube tests with testkit.)
 */
export function ipFamilyOf(address: unknown): IpFamily | undefined {
  if (typeof address !== 'string') return undefined;
  if (isIPv4(address)) return 'IPv4';
  return isIPv6(address) && !address.includes('%') ? 'IPv6' : undefined;
}
