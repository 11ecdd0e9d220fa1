import type { PluginContext } from '@kube-router/controller';
import { Mutex, Nft, nftTableLock, parseNftJson } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { netpolFamilies } from '@kube-router/netpol';
import type { IpFamily, NetpolDataplane, NodeApplied } from '@kube-router/netpol';
import { verdictCountersOf } from './counters.js';
import { IptablesLeftoversRemoval } from './iptables-leftovers.js';
import { KernelApplier } from './kernel.js';
import type { ApplyResult, NodeRenders } from './kernel.js';
import { tableRef } from './kernel-script.js';
import { NetpolNftablesMetrics } from './metrics.js';
import { TABLES } from './names.js';
import type { ResolvedNetpolNftablesOptions } from './options.js';
import { NodeRenderer } from './render-node.js';
import { renderPolicy } from './render-policy.js';
import type { PolicyRender } from './render-policy.js';
import { deleteNetpolTables } from './tables.js';

/** The nftables side of the netpol controller (createNetpolController): one table per family. */
export function createNftablesDataplane(ctx: PluginContext, options: ResolvedNetpolNftablesOptions, runner: CommandRunner): NetpolDataplane<PolicyRender, NodeRenders> {
  const families = netpolFamilies(options);
  const metrics = new NetpolNftablesMetrics(ctx.metrics.registry);
  const nftHolding = (...locked: IpFamily[]) =>
    new Nft({
      runner,
      ...(options.netns === undefined ? {} : { netns: options.netns }),
      timeoutMs: options.commandTimeoutMs,
      // Writes to one table apply in the order they were issued; the two tables are written at the same time.
      lock: locked.map((family) => nftTableLock(tableRef(family))),
    });
  const nft = { ipv4: nftHolding('ipv4'), ipv6: nftHolding('ipv6'), both: nftHolding('ipv4', 'ipv6') };
  // The verdict counters' reads run at scrape time: no write lock (a listing is consistent without it), so that a
  // scrape never waits for a sync's transactions, nor delays them.
  const counterReader = new Nft({
    runner,
    ...(options.netns === undefined ? {} : { netns: options.netns }),
    timeoutMs: options.commandTimeoutMs,
    lock: new Mutex(),
  });
  const applier = new KernelApplier({ families, nft, logger: ctx.logger, timings: metrics });
  const nodeRenderer = new NodeRenderer(families, options);
  const leftovers = new IptablesLeftoversRemoval(
    {
      runner,
      // A family disabled now (--enable-ipv6=false) as well: the iptables backend may have enforced it, and its rules
      // would go on isolating pods of that family by policies long gone.
      families: ['ipv4', 'ipv6'],
      backend: options.iptablesBackend,
      ...(options.netns === undefined ? {} : { netns: options.netns }),
      timeoutMs: options.commandTimeoutMs,
    },
    options.removeIptablesLeftovers,
    ctx.logger,
  );
  /**
   * A family enforced before and disabled now (--enable-ipv6=false after a run with it): its table is no longer kept
   * up to date, and left in place it would go on enforcing what it held, isolating pods by policies long gone.
   */
  const disabledFamilies = (['ipv4', 'ipv6'] as const).filter((family) => !families.includes(family));
  let disabledTablesRemoved = disabledFamilies.length === 0;

  return {
    metrics,
    renderPolicy: (policy) => renderPolicy(policy, families),
    renderNode: (model, input) => nodeRenderer.render(model, input),
    async prepare({ full }) {
      // Full syncs read the tables back to repair drift; triggered ones trust what they wrote. A failed read is left
      // to the apply, which reads again and reports it. Only the leftovers' removal waits until our tables enforce.
      if (full) applier.invalidate();
      leftovers.beginSync();
      await applier.ready().catch(() => undefined);
    },
    applyPolicies: (policies, node, progress) => applier.applyPolicies(policies, node, progress),
    applyNode: async (node, progress) => nodeApplied(await applier.applyNode(node, progress)),
    async removeLeftovers({ failures }, enforcing) {
      // Our tables enforce now: what the iptables backend left can go without a moment of no enforcer.
      await leftovers.finishSync(failures, enforcing);
      if (disabledTablesRemoved || !enforcing) return;
      try {
        const removed = await deleteNetpolTables(nft.both, disabledFamilies);
        disabledTablesRemoved = true;
        if (removed > 0) ctx.logger.info({ families: disabledFamilies }, 'removed the netpol table of a family that is not enabled');
      } catch (error) {
        failures.add('disabled-family-table', error);
      }
    },
    async readCounters() {
      const counters = [];
      // A table not there yet (before the first sync) has nothing to count; listing it would fail.
      const { tables } = await counterReader.list(['tables']);
      for (const family of families) {
        const { family: nftFamily, name } = TABLES[family];
        if (!tables.some((table) => table.family === nftFamily && table.name === name)) continue;
        // Terse (`-t`): without the sets' elements, which the counters do not need and a large cluster has many of.
        const listed = await counterReader.run(['-j', '-t', 'list', 'table', nftFamily, name]);
        counters.push(...verdictCountersOf(parseNftJson(listed.stdout), family));
      }
      return counters;
    },
    counts: () => applier.counts(),
    takeDrift: () => applier.takeDrift(),
    start: () => leftovers.searchAhead(),
    stop: () => leftovers.forget(),
  };
}

function nodeApplied(result: ApplyResult): NodeApplied {
  const failures = new Map<string, unknown>();
  if (result.nodeFailure !== undefined) failures.set('dispatch', result.nodeFailure);
  if (result.writeFailure !== undefined) failures.set('nftables', result.writeFailure);
  for (const [object, error] of result.staleFailures) failures.set(`stale/${object}`, error);
  const { transactions, chainsWritten, setsWritten, deleted } = result;
  return { enforcing: result.enforcing, failures, written: { transactions, chainsWritten, setsWritten, deleted } };
}
