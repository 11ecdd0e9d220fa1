import type { IpFamily } from '@kube-router/netpol';
import { hasTool, Ipset, IpsetScript, Iptables, renderIptablesRestore } from '@kube-router/netfilter';
import type { CommandRunner, IptablesBackend } from '@kube-router/netfilter';
import { BUILTIN_CHAINS, TOP_CHAINS, isOwnChain, isOwnSet } from './names.js';
import { removeNftablesLeftovers } from './nftables-leftovers.js';

export interface CleanupOptions {
  readonly runner: CommandRunner;
  /** The enabled families: always cleaned; a disabled family is cleaned too where its tools and kernel support exist. */
  readonly families: readonly IpFamily[];
  readonly backend: IptablesBackend;
  readonly netns?: string;
  readonly timeoutMs: number;
}

/**
 * --cleanup-config: the jumps from the built-in chains, every chain and ipset of ours (and the nftables backend's
 * tables, in case it ran last), nothing of anyone else's. Each family is one iptables-restore, so a half-removed
 * state is never seen; every failure is reported, joined.
 */
export async function removeIptablesNetpol(options: CleanupOptions): Promise<void> {
  const errors: unknown[] = [];
  const netns = options.netns === undefined ? {} : { netns: options.netns };
  for (const family of ['ipv4', 'ipv6'] as const) {
    const iptables = new Iptables({ runner: options.runner, family, backend: options.backend, ...netns, timeoutMs: options.timeoutMs });
    // A family disabled now may have been enforced by an earlier run: its rules go too, where it can be read at all.
    if (!options.families.includes(family) && !iptables.canSaveAndRestore()) continue;
    try {
      await removeOwnFilterRules(iptables);
    } catch (error) {
      errors.push(error);
    }
  }
  if (hasTool('ipset')) {
    try {
      const ipset = new Ipset({ runner: options.runner, ...netns, timeoutMs: options.timeoutMs });
      const names = (await ipset.listNames()).filter(isOwnSet);
      if (names.length > 0) {
        const script = new IpsetScript();
        for (const name of names) script.destroy(name);
        await ipset.restore(script);
      }
    } catch (error) {
      errors.push(error);
    }
  }
  try {
    await removeNftablesLeftovers(options.runner, options.netns, options.timeoutMs);
  } catch (error) {
    errors.push(error);
  }
  if (errors.length > 0) throw new AggregateError(errors, `netpol cleanup failed: ${errors.map(String).join('; ')}`);
}

/**
 * The jumps from the built-in chains to ours and every chain of ours in one family's filter table, in one
 * iptables-restore (never seen half-removed); resolves with how many rules and chains went.
 */
export async function removeOwnFilterRules(iptables: Iptables): Promise<number> {
  const top = new Set<string>(Object.values(TOP_CHAINS));
  const table = await iptables.saveParsed('filter');
  const jumps = table.chains
    .filter((chain) => BUILTIN_CHAINS.includes(chain.name as never))
    .flatMap((chain) => chain.rules.filter((rule) => rule.target !== undefined && top.has(rule.target)));
  const chains = table.chains.filter((chain) => !chain.builtin && isOwnChain(chain.name)).map((chain) => chain.name);
  if (jumps.length === 0 && chains.length === 0) return 0;
  await iptables.restore(
    renderIptablesRestore([{ table: 'filter', chains: [], lines: jumps.map((rule) => `-D ${rule.chain} ${rule.spec}`), deleteChains: chains }]),
  );
  return jumps.length + chains.length;
}
