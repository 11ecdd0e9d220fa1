export type IpFamily = 'ipv4' | 'ipv6';

/** ipset's and nftables' name for an address family. */
export function inetFamily(family: IpFamily): 'inet' | 'inet6' {
  return family === 'ipv4' ? 'inet' : 'inet6';
}
