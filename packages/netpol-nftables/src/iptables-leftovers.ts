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
  /** The families to search: every one the iptables backend may have run with, not only those enabled now. */
  readonly families: readonly IpFamily[];
  readonly backend: IptablesBackend;
  readonly netns?: string;
  readonly timeoutMs: number;
}

/** What the iptables backend left, as found; `remove()` deletes it and resolves with how many objects went. */
export interface IptablesLeftovers {
  readonly count: number;
  remove(): Promise<number>;
}

/**
 * Finds the iptables backend's jumps, chains and ipsets (reads only, so it may run beside our own transaction).
 * Someone else's rules and chains are left out, and a family the kernel lacks, or whose tools are absent, has nothing
 * to remove.
 */
export async function findIptablesLeftovers(options: IptablesLeftoversOptions): Promise<IptablesLeftovers> {
  const netns = options.netns === undefined ? {} : { netns: options.netns };
  const errors: unknown[] = [];
  const removals: { count: number; run: () => Promise<void> }[] = [];
  const ipset = new Ipset({ runner: options.runner, ...netns, timeoutMs: options.timeoutMs });
  const findSets = async () => {
    const names = (await ipset.listNames()).filter((name) => SET.test(name));
    if (names.length === 0) return;
    const script = new IpsetScript();
    for (const name of names) script.destroy(name);
    // The sets go last: the chains that match on them must be gone first.
    return { count: names.length, run: () => ipset.restore(script) };
  };
  const findRules = async (family: IpFamily) => {
    const iptables = new Iptables({ runner: options.runner, family, backend: options.backend, ...netns, timeoutMs: options.timeoutMs });
    if (!iptables.canSaveAndRestore()) return;
    const table = await iptables.saveParsed('filter');
    const jumps = table.chains
      .filter((chain) => chain.builtin)
      .flatMap((chain) => chain.rules.filter((rule) => rule.target !== undefined && TOP.includes(rule.target)));
    const chains = table.chains.filter((chain) => !chain.builtin && CHAIN.test(chain.name)).map((chain) => chain.name);
    if (jumps.length === 0 && chains.length === 0) return;
    const restore = renderIptablesRestore([
      { table: 'filter', chains: [], lines: jumps.map((rule) => `-D ${rule.chain} ${rule.spec}`), deleteChains: chains },
    ]);
    return { count: jumps.length + chains.length, run: () => iptables.restore(restore) };
  };
  const found = await Promise.allSettled([...options.families.map(findRules), findSets()]);
  for (const outcome of found) {
    if (outcome.status === 'rejected') errors.push(outcome.reason);
    else if (outcome.value) removals.push(outcome.value);
  }
  if (errors.length > 0) throw leftoversError(errors);
  return {
    count: removals.reduce((sum, removal) => sum + removal.count, 0),
    async remove() {
      let removed = 0;
      const failed: unknown[] = [];
      for (const removal of removals) {
        try {
          await removal.run();
          removed += removal.count;
        } catch (error) {
          failed.push(error);
        }
      }
      if (failed.length > 0) throw leftoversError(failed);
      return removed;
    },
  };
}

/** Removes the iptables backend's jumps, chains and ipsets; resolves with how many objects went. */
export async function removeIptablesLeftovers(options: IptablesLeftoversOptions): Promise<number> {
  return (await findIptablesLeftovers(options)).remove();
}

function leftoversError(errors: readonly unknown[]): AggregateError {
  return new AggregateError(errors, `could not remove every iptables netpol leftover: ${errors.map(String).join('; ')}`);
}

/**
 * The iptables backend's leftovers over the syncs: searched for when the controller starts, while the informers list
 * the cluster (three tool runs, ipset, iptables-save and ip6tables-save, that would otherwise share the CPUs with the
 * first sync's compile; nothing changes what they find meanwhile, as the iptables backend is not running beside this
 * one), and removed by the first sync whose tables enforce. A sync after a failed removal searches again.
 */
export class IptablesLeftoversRemoval {
  readonly #options: IptablesLeftoversOptions;
  readonly #logger: { info(details: object, message: string): void };
  #removed: boolean;
  /** Begun by searchAhead(), for the next sync. */
  #ahead: Promise<{ found?: IptablesLeftovers; error?: unknown }> | undefined;
  /** The running sync's search. */
  #current: Promise<{ found?: IptablesLeftovers; error?: unknown }> | undefined;

  constructor(options: IptablesLeftoversOptions, enabled: boolean, logger: { info(details: object, message: string): void }) {
    this.#options = options;
    this.#logger = logger;
    this.#removed = !enabled;
  }

  searchAhead(): void {
    if (!this.#removed) this.#ahead ??= this.#search();
  }

  /** A start after a stop searches afresh. */
  forget(): void {
    this.#ahead = undefined;
  }

  /** At a sync's start: the search begun ahead serves it, else one begins now, beside the compile and the writes. */
  beginSync(): void {
    this.#current = this.#removed ? undefined : (this.#ahead ?? this.#search());
    this.#ahead = undefined;
  }

  /** Once the sync wrote: removes what was found if our tables enforce; failures join the sync's. */
  async finishSync(failures: { add(what: string, error: unknown): void }, enforcing: boolean): Promise<void> {
    const search = this.#current;
    this.#current = undefined;
    if (!search) return;
    const { found, error } = await search;
    if (error !== undefined) {
      failures.add('iptables-leftovers', error);
      return;
    }
    if (!found || !enforcing) return;
    try {
      const removed = await found.remove();
      this.#removed = true;
      if (removed > 0) this.#logger.info({ removed }, 'removed the iptables netpol backend leftovers');
    } catch (removal) {
      failures.add('iptables-leftovers', removal);
    }
  }

  #search(): Promise<{ found?: IptablesLeftovers; error?: unknown }> {
    return findIptablesLeftovers(this.#options).then((found) => ({ found }), (error: unknown) => ({ error }));
  }
}
