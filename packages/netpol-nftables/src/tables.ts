import { CommandError } from '@kube-router/netfilter';
import type { Nft } from '@kube-router/netfilter';
import type { IpFamily } from '@kube-router/netpol';
import { TABLES } from './names.js';

/**
 * Deletes the netpol tables of these families (both by default) where they exist, and says how many it deleted. Only
 * a table the listing shows is deleted, so that an agent running with IPv6 off writes nothing to the `ip6` family
 * unless a table of ours is there. A table gone meanwhile is not an error.
 */
export async function deleteNetpolTables(nft: Nft, families: readonly IpFamily[] = ['ipv4', 'ipv6']): Promise<number> {
  const listed = new Set((await nft.list(['tables'])).tables.map((table) => `${table.family} ${table.name}`));
  let deleted = 0;
  for (const family of families) {
    const table = TABLES[family];
    if (!listed.has(`${table.family} ${table.name}`)) continue;
    try {
      await nft.apply(`delete table ${table.family} ${table.name}\n`);
      deleted++;
    } catch (error) {
      if (error instanceof CommandError && /No such file or directory/.test(error.stderr)) continue;
      throw error;
    }
  }
  return deleted;
}
