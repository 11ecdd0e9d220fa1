import type { Nft } from '@kube-router/netfilter';
import type { IpFamily } from '@kube-router/netpol';
import { TABLES } from './names.js';

/**
 * Deletes the netpol tables of these families (both by default) where they exist, and says how many it deleted. An
 * agent running with IPv6 off writes nothing to the `ip6` family unless a table of ours is there (Nft.deleteTables).
 */
export function deleteNetpolTables(nft: Nft, families: readonly IpFamily[] = ['ipv4', 'ipv6']): Promise<number> {
  return nft.deleteTables(families.map((family) => TABLES[family]));
}
