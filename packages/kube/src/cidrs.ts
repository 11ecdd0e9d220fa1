import ipaddr from 'ipaddr.js';
import { parseIp } from './ip-address.js';

/** A CIDR as network and prefix length, ready for `inCidrs`. */
export type ParsedCidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** Parses CIDRs that were validated already (flags, plugin options); a bad one throws. */
export function parseCidrs(cidrs: readonly string[]): ParsedCidr[] {
  return cidrs.map((cidr) => ipaddr.parseCIDR(cidr));
}

/**
 * Whether an address lies in one of the CIDRs; an IPv4-mapped IPv6 address counts as the IPv4 address it maps. Text
 * that parseIp refuses (`010.0.0.1`, a zone) lies in none.
 */
export function inCidrs(address: string, cidrs: readonly ParsedCidr[]): boolean {
  const parsed = parseIp(address)?.address;
  if (parsed === undefined) return false;
  return cidrs.some(([network, bits]) => network.kind() === parsed.kind() && parsed.match(network, bits));
}
