import { existsSync } from 'node:fs';

export type IpFamily = 'ipv4' | 'ipv6';

/** ipset's and nftables' name for an address family. */
export function inetFamily(family: IpFamily): 'inet' | 'inet6' {
  return family === 'ipv4' ? 'inet' : 'inet6';
}

/**
 * Whether the kernel can hold rules of this family at all: IPv4 always, IPv6 unless the kernel has none (built
 * without it, or booted with ipv6.disable=1, when /proc/sys/net/ipv6 is absent). Without it there is nothing of the
 * family to read or remove, and the family's tools fail.
 */
export function kernelHasFamily(family: IpFamily): boolean {
  return family === 'ipv4' || existsSync('/proc/sys/net/ipv6');
}
