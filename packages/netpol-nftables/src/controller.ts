import { createSyncController, SyncFailures } from '@kube-router/controller';
import type { Controller, PluginContext } from '@kube-router/controller';
import { Mutex, Nft, nftTableLock } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import {
  NETPOL_CONTROLLER,
  PolicyCompiler,
  PolicyRenders,
  PolicyWarnings,
  DefaultDenyPodCidrs,
  netpolFamilies,
  reportPolicyProblems,
  reportRefusedPolicies,
} from '@kube-router/netpol';
import type { IpFamily, LocalPod, NetpolSources } from '@kube-router/netpol';
import { findIptablesLeftovers } from './iptables-leftovers.js';
import type { IptablesLeftovers } from './iptables-leftovers.js';
import { KernelApplier, tableRef } from './kernel.js';
import { NetpolNftablesMetrics } from './metrics.js';
import type { ResolvedNetpolNftablesOptions } from './options.js';
import { cidrFamily, PodChainCache, renderNode } from './render-node.js';
import type { NodeRender } from './render-node.js';
import { renderPolicy } from './render-policy.js';
import { deleteNetpolTables } from './tables.js';

export interface NetpolControllerDeps {
  readonly sources: NetpolSources;
  readonly runner: CommandRunner;
}

export function createNetpolNftablesController(
  ctx: PluginContext,
  deps: NetpolControllerDeps,
  options: ResolvedNetpolNftablesOptions,
): Controller {
  const families = netpolFamilies(options);
  const ranges = [...options.serviceClusterIpRanges, ...options.serviceExternalIpRanges, ...options.serviceLoadBalancerIpRanges];
  for (const range of ranges) cidrFamily(range);

  const metrics = new NetpolNftablesMetrics(ctx.metrics.registry);
  const nftHolding = (...families: IpFamily[]) =>
    new Nft({
      runner: deps.runner,
      ...(options.netns === undefined ? {} : { netns: options.netns }),
      timeoutMs: options.commandTimeoutMs,
      // Writes to one table apply in the order they were issued; the two tables are written at the same time.
      lock: families.map((family) => nftTableLock(tableRef(family))),
    });
  const nft = { ipv4: nftHolding('ipv4'), ipv6: nftHolding('ipv6'), both: nftHolding('ipv4', 'ipv6') };
  const applier = new KernelApplier({ families, nft, logger: ctx.logger, timings: metrics });
  const compiler = new PolicyCompiler({ nodeName: ctx.nodeName });
  const renders = new PolicyRenders((policy) => renderPolicy(policy, families));
  const podChains = new PodChainCache();
  let nodeRenders: { pods: readonly LocalPod[]; podCidrs: string; renders: Map<string, NodeRender> } = { pods: [], podCidrs: '', renders: new Map() };
  const warnings = new PolicyWarnings((...args) => deps.sources.warnPolicy(...args));
  const defaultDenyCidrs = new DefaultDenyPodCidrs();
  const exclusive = new Mutex();
  let leftoversRemoved = !options.removeIptablesLeftovers;
  /**
   * A family enforced before and disabled now (--enable-ipv6=false after a run with it): its table is no longer kept
   * up to date, and left in place it would go on enforcing what it held, isolating pods by policies long gone.
   */
  const disabledFamilies = (['ipv4', 'ipv6'] as const).filter((family) => !families.includes(family));
  let disabledTablesRemoved = disabledFamilies.length === 0;
  const searchLeftovers = (): Promise<{ found?: IptablesLeftovers; error?: unknown }> =>
    findIptablesLeftovers({
      runner: deps.runner,
      // A family disabled now (--enable-ipv6=false) as well: the iptables backend may have enforced it, and its
      // rules would go on isolating pods of that family by policies long gone.
      families: ['ipv4', 'ipv6'],
      backend: options.iptablesBackend,
      ...(options.netns === undefined ? {} : { netns: options.netns }),
      timeoutMs: options.commandTimeoutMs,
    }).then((found) => ({ found }), (error: unknown) => ({ error }));
  /**
   * Begun by start(), while the informers list the cluster: three tool runs (ipset, iptables-save, ip6tables-save)
   * that would otherwise spawn from the event loop and share the CPUs with the first sync's compile. Nothing changes
   * what they find meanwhile: the iptables backend is not running beside this one.
   */
  let leftoversSearch: ReturnType<typeof searchLeftovers> | undefined;
  let unsubscribe: (() => void) | undefined;

  const sync = async (progress: () => void, signal: AbortSignal, reason: string): Promise<void> => {
    if (!deps.sources.hasSynced()) {
      throw new Error('informer caches have not synced: refusing to program rules from an incomplete view');
    }
    const failures = new SyncFailures();
    const started = performance.now();
    const podCidrs = options.defaultDeny ? defaultDenyCidrs.read(deps.sources, ctx.nodeName, failures) : [];
    // Periodic syncs read the tables back to repair drift; triggered ones trust what they wrote.
    if (reason === 'periodic' || reason === 'initial') applier.invalidate();
    // Reading the tables back and looking for what the iptables backend left are other processes: they run while the
    // policies compile, on another core, instead of after. A failed read is left to apply(), which reads again and
    // reports it. Only the leftovers' removal waits until our tables enforce (nothing changes them meanwhile).
    const tablesRead = applier.ready().catch(() => undefined);
    // The search start() began serves the first sync; a later sync (the removal failed) searches again.
    const leftovers = leftoversRemoved ? undefined : (leftoversSearch ?? searchLeftovers());
    leftoversSearch = undefined;
    // In slices: a full compile of a large cluster would otherwise hold the event loop for seconds (/healthz, watches).
    const model = await compiler.compileAsync({
      pods: deps.sources.pods(),
      namespaces: deps.sources.namespaces(),
      policies: deps.sources.policies(),
    });
    progress();
    const policyRenders = await renders.update(model, progress);
    const computeSeconds = (performance.now() - started) / 1000;
    metrics.computeTime.observe(computeSeconds);
    await tablesRead;
    signal.throwIfAborted();

    const nodeOptions = { ...options, podCidrs };
    // The applier asks for the node's objects more than once per sync; each answer stands for the whole sync, and for
    // the next ones while the model keeps its local pods (an event that changes only peers) and the pod CIDRs stay.
    const renderedFor = { pods: model.pods, podCidrs: podCidrs.join(',') };
    if (nodeRenders.pods !== renderedFor.pods || nodeRenders.podCidrs !== renderedFor.podCidrs) {
      podChains.nextSync();
      nodeRenders = { ...renderedFor, renders: new Map() };
    }
    const nodeRenderCache = nodeRenders.renders;
    const renderThisNode = (family: IpFamily, failed: ReadonlySet<string>): NodeRender => {
      const key = [family, ...[...failed].sort()].join('\0');
      let render = nodeRenderCache.get(key);
      if (!render) nodeRenderCache.set(key, (render = renderNode(model, family, nodeOptions, failed, podChains)));
      return render;
    };
    const applyStarted = performance.now();
    const result = await applier.apply({ policies: policyRenders, renderNode: renderThisNode }, progress);
    metrics.policyChainsSyncTime.observe((performance.now() - applyStarted) / 1000);

    // Our tables enforce now: what the iptables backend left can go without a moment of no enforcer.
    if (leftovers) {
      const { found, error } = await leftovers;
      if (error !== undefined) {
        failures.add('iptables-leftovers', error);
      } else if (found && result.nodeFailure === undefined && result.writeFailure === undefined) {
        try {
          const removed = await found.remove();
          leftoversRemoved = true;
          if (removed > 0) ctx.logger.info({ removed }, 'removed the iptables netpol backend leftovers');
        } catch (removal) {
          failures.add('iptables-leftovers', removal);
        }
      }
    }

    // Once our own tables enforce, as for the leftovers above.
    if (!disabledTablesRemoved && result.nodeFailure === undefined && result.writeFailure === undefined) {
      try {
        const removed = await deleteNetpolTables(nft.both, disabledFamilies);
        disabledTablesRemoved = true;
        if (removed > 0) ctx.logger.info({ families: disabledFamilies }, 'removed the netpol table of a family that is not enabled');
      } catch (error) {
        failures.add('disabled-family-table', error);
      }
    }

    warnings.begin();
    const failedClosed = reportPolicyProblems(model, failures, warnings);
    reportRefusedPolicies(result.failedPolicies, failures, failedClosed, warnings);
    warnings.end();
    if (result.nodeFailure !== undefined) failures.add('dispatch', result.nodeFailure);
    if (result.writeFailure !== undefined) failures.add('nftables', result.writeFailure);
    for (const [object, error] of result.staleFailures) failures.add(`stale/${object}`, error);

    const counts = applier.counts();
    metrics.policyChains.set(counts.chains);
    metrics.policyIpsets.set(counts.sets);
    metrics.rules.set(counts.rules);
    metrics.failedPolicies.set(failedClosed.size);
    metrics.syncTime.observe((performance.now() - started) / 1000);
    ctx.logger.debug(
      {
        reason,
        computeMs: Math.round(computeSeconds * 1000),
        totalMs: Math.round(performance.now() - started),
        policies: model.policies.length,
        pods: model.pods.length,
        transactions: result.transactions,
        chainsWritten: result.chainsWritten,
        setsWritten: result.setsWritten,
        deleted: result.deleted,
      },
      'netpol sync applied',
    );
    failures.throwIfAny(NETPOL_CONTROLLER);
  };

  return createSyncController(ctx, {
    name: NETPOL_CONTROLLER,
    syncPeriodMs: options.syncPeriodMs,
    ...(options.minSyncIntervalMs !== undefined && { minSyncIntervalMs: options.minSyncIntervalMs }),
    ...(options.syncTimeoutMs !== undefined && { syncTimeoutMs: options.syncTimeoutMs }),
    sync: ({ progress, signal, reason }) => exclusive.runExclusive(() => sync(progress, signal, reason)),
    start(startCtx) {
      if (!leftoversRemoved) leftoversSearch ??= searchLeftovers();
      unsubscribe = deps.sources.onChange(() => startCtx.requestSync('cluster changed'));
    },
    // The tables stay when the agent stops: a restarted agent adopts them, and pods stay protected meanwhile.
    stop() {
      unsubscribe?.();
      unsubscribe = undefined;
      // A start after this one searches afresh.
      leftoversSearch = undefined;
    },
  });
}
