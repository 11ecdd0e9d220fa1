import type { IpFamily } from '@kube-router/netpol';
import { Ipset, IpsetScript, Iptables, renderIptablesRestore } from '@kube-router/netfilter';
import type { CommandRunner, IptablesBackend } from '@kube-router/netfilter';

/*
 * What the iptables backend (netpol-iptables) leaves in the filter table and in ipset, named here because a plugin
 * never imports another plugin. The names are kube-router's: its top-level chains with the jumps to them from the
 * built-in chains, the common/default/tail chains, pod and policy chains (prefix + 16 hex digits), and its sets.
 */
const TOP = ['KUBE-ROUTER-INPUT', 'KUBE-ROUTER-FORWARD', 'KUBE-ROUTER-OUTPUT'];
const CHAIN = /^(?:KUBE-ROUTER-(?:INPUT|FORWARD|OUTPUT)|KUBE-NWPLCY-(?:COMMON|DEFAULT|TAIL)|KUBE-POD-FW-[0-9A-F]{16}|KUBE-NWPLCY-[0-9A-F]{16})$/;
const SET = /^(?:KUBE-(?:SRC|DST)-[0-9A-F]{16}|KUBE-TMP-NETPOL|kube-router-local-pods|inet6:kube-router-local-pods)$/;

export interface IptablesLeftoversOptions {
  readonly runner: CommandRunner;
  readonly families: readonly IpFamily[];
  readonly backend: IptablesBackend;
  readonly netns?: string;
  readonly timeoutMs: number;
}

/**
 * Removes the iptables backend's jumps, chains and ipsets, in one iptables-restore per family and one ipset restore;
 * resolves with how many objects went. Someone else's rules and chains are left alone, and a family whose tool is
 * absent has nothing to remove.
 */
export async function removeIptablesLeftovers(options: IptablesLeftoversOptions): Promise<number> {
  let removed = 0;
  const errors: unknown[] = [];
  for (const family of options.families) {
    try {
      const iptables = new Iptables({
        runner: options.runner,
        family,
        backend: options.backend,
        ...(options.netns === undefined ? {} : { netns: options.netns }),
        timeoutMs: options.timeoutMs,
      });
      const table = await iptables.saveParsed('filter');
      const jumps = table.chains
        .filter((chain) => chain.builtin)
        .flatMap((chain) => chain.rules.filter((rule) => rule.target !== undefined && TOP.includes(rule.target)));
      const chains = table.chains.filter((chain) => !chain.builtin && CHAIN.test(chain.name)).map((chain) => chain.name);
      if (jumps.length === 0 && chains.length === 0) continue;
      await iptables.restore(
        renderIptablesRestore([
          { table: 'filter', chains: [], lines: jumps.map((rule) => `-D ${rule.chain} ${rule.spec}`), deleteChains: chains },
        ]),
      );
      removed += jumps.length + chains.length;
    } catch (error) {
      errors.push(error);
    }
  }
  try {
    const ipset = new Ipset({ runner: options.runner, ...(options.netns === undefined ? {} : { netns: options.netns }), timeoutMs: options.timeoutMs });
    const names = (await ipset.listNames()).filter((name) => SET.test(name));
    if (names.length > 0) {
      const script = new IpsetScript();
      for (const name of names) script.destroy(name);
      await ipset.restore(script);
      removed += names.length;
    }
  } catch (error) {
    errors.push(error);
  }
  if (errors.length > 0) throw new AggregateError(errors, `could not remove every iptables netpol leftover: ${errors.map(String).join('; ')}`);
  return removed;
}
