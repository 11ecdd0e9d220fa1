import { hasTool, Nft } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';

/**
 * The nftables backend's tables (netpol-nftables, kube-router's --use-nftables-for-netpol), named here because a
 * plugin never imports another plugin. Nothing but that backend lives in them.
 */
export const NFTABLES_NETPOL_TABLES = [
  { family: 'ip', name: 'kube-router-filter-ipv4' },
  { family: 'ip6', name: 'kube-router-filter-ipv6' },
] as const;

/**
 * Deletes the nftables backend's tables where they exist, so that a switch of backend leaves one enforcer. Resolves
 * true once there is nothing left (also without nft installed: then there can be no tables). Only tables nft lists
 * are named, so that a kernel without IPv6 does not fail every sync (Nft.deleteTables).
 */
export async function removeNftablesLeftovers(runner: CommandRunner, netns: string | undefined, timeoutMs: number): Promise<boolean> {
  if (!hasTool('nft')) return true;
  const nft = new Nft({ runner, ...(netns === undefined ? {} : { netns }), timeoutMs });
  await nft.deleteTables(NFTABLES_NETPOL_TABLES);
  return true;
}
