import { createSyncController, SyncFailures } from '@kube-router/controller';
import type { Controller, PluginContext } from '@kube-router/controller';
import { FailFastSession, Ipset, Iptables, Mutex } from '@kube-router/netfilter';
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
import type { IpFamily, NetpolSources } from '@kube-router/netpol';
import { removeOwnFilterRules } from './cleanup.js';
import { KernelApplier } from './kernel.js';
import type { DesiredState } from './kernel.js';
import { NetpolMetrics } from './metrics.js';
import type { ResolvedNetpolIptablesOptions } from './options.js';
import { removeNftablesLeftovers } from './nftables-leftovers.js';
import { cidrFamily, renderLocalPodsSet, renderNode } from './render-node.js';
import { renderPolicy } from './render-policy.js';

export interface NetpolControllerDeps {
  readonly sources: NetpolSources;
  readonly runner: CommandRunner;
}

export function createNetpolController(
  ctx: PluginContext,
  deps: NetpolControllerDeps,
  options: ResolvedNetpolIptablesOptions,
): Controller {
  const families = netpolFamilies(options);
  // Fail at start on a bad range rather than at the first sync.
  for (const range of [...options.serviceClusterIpRanges, ...options.serviceExternalIpRanges]) cidrFamily(range);

  const metrics = new NetpolMetrics(ctx.metrics.registry);
  // Each sync's kernel writes depend on each other: once one times out, the rest fail at once instead of each
  // waiting out its own timeout, so a hung iptables-restore fails the sync within about one command timeout.
  const session = new FailFastSession(deps.runner);
  const iptables: Partial<Record<IpFamily, Iptables>> = {};
  for (const family of families) {
    iptables[family] = new Iptables({
      runner: session,
      family,
      backend: options.iptablesBackend,
      netns: options.netns,
      timeoutMs: options.commandTimeoutMs,
    });
  }
  const applier = new KernelApplier({
    families,
    iptables,
    ipset: new Ipset({ runner: session, netns: options.netns, timeoutMs: options.commandTimeoutMs }),
    logger: ctx.logger,
    timings: metrics,
  });
  const compiler = new PolicyCompiler({ nodeName: ctx.nodeName });
  const renders = new PolicyRenders((policy) => renderPolicy(policy, families));
  const warnings = new PolicyWarnings((...args) => deps.sources.warnPolicy(...args));
  const defaultDenyCidrs = new DefaultDenyPodCidrs();
  const exclusive = new Mutex();
  let unsubscribe: (() => void) | undefined;
  let nftablesLeftoversRemoved = false;
  /**
   * A family enforced before and disabled now (--enable-ipv6=false after a run with it): its chains are no longer
   * kept up to date, and left in place they would go on isolating pods by policies long gone, and hold the family's
   * ipsets, which the stale-set sweep could then never destroy. A kernel without the family, or a node without its
   * tools, holds none of it.
   */
  const disabledFamilies = (['ipv4', 'ipv6'] as const)
    .filter((family) => !families.includes(family))
    .map((family) => new Iptables({ runner: deps.runner, family, backend: options.iptablesBackend, netns: options.netns, timeoutMs: options.commandTimeoutMs }))
    .filter((disabled) => disabled.canSaveAndRestore());
  let disabledFamiliesRemoved = disabledFamilies.length === 0;

  const sync = async (progress: () => void, signal: AbortSignal, reason: string): Promise<void> => {
    if (!deps.sources.hasSynced()) {
      throw new Error('informer caches have not synced: refusing to program rules from an incomplete view');
    }
    const started = performance.now();
    const failures = new SyncFailures();
    const podCidrs = options.defaultDeny ? defaultDenyCidrs.read(deps.sources, ctx.nodeName, failures) : [];
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
    signal.throwIfAborted();

    // Periodic syncs re-read the kernel to repair drift; triggered ones trust what they wrote.
    if (reason === 'periodic' || reason === 'initial') applier.invalidate();
    const desired: DesiredState = {
      policies: policyRenders,
      renderNode: (family, failed) => renderNode(model, family, { ...options, podCidrs }, failed),
      nodeSets: options.defaultDeny ? families.map((family) => renderLocalPodsSet(model, family)) : [],
    };
    // Before the apply, whose stale-set sweep then destroys the released family's sets, on which nothing matches any
    // more: nothing enforces that family any more, before or after.
    if (!disabledFamiliesRemoved) {
      const removals = await Promise.allSettled(disabledFamilies.map(removeOwnFilterRules));
      removals.forEach((removal, index) => {
        const { family } = disabledFamilies[index] as Iptables;
        if (removal.status === 'rejected') {
          failures.add(`disabled-family/${family}`, removal.reason);
          return;
        }
        applier.releaseFamily(family);
        if (removal.value > 0) ctx.logger.info({ family, removed: removal.value }, 'removed the netpol chains of a family that is not enabled');
      });
      disabledFamiliesRemoved = removals.every((removal) => removal.status === 'fulfilled');
    }
    const applyStarted = performance.now();
    session.begin();
    const result = await applier.apply(desired, progress);
    metrics.policyChainsSyncTime.observe((performance.now() - applyStarted) / 1000);

    // Our chains enforce now: the nftables backend's tables can go without a moment of no enforcer.
    if (!nftablesLeftoversRemoved && result.nodeFailures.size === 0) {
      try {
        nftablesLeftoversRemoved = await removeNftablesLeftovers(deps.runner, options.netns, options.commandTimeoutMs);
      } catch (error) {
        failures.add('nftables-leftovers', error);
      }
    }

    warnings.begin();
    const failedClosed = reportPolicyProblems(model, failures, warnings);
    reportRefusedPolicies(result.failedPolicies, failures, failedClosed, warnings);
    warnings.end();
    for (const [family, error] of result.nodeFailures) failures.add(`node/${family}`, error);
    for (const [set, error] of result.setFailures) failures.add(`ipset/${set}`, error);
    for (const [chains, error] of result.chainFailures) failures.add(`stale-chains/${chains}`, error);

    const counts = applier.counts();
    metrics.policyChains.set(counts.chains);
    metrics.policyIpsets.set(counts.sets);
    metrics.failedPolicies.set(failedClosed.size);
    metrics.syncTime.observe((performance.now() - started) / 1000);
    ctx.logger.debug(
      {
        reason,
        computeMs: Math.round(computeSeconds * 1000),
        totalMs: Math.round(performance.now() - started),
        policies: model.policies.length,
        pods: model.pods.length,
        chainsWritten: result.chainsWritten,
        setsWritten: result.setsWritten,
        chainsDeleted: result.chainsDeleted,
        setsDestroyed: result.setsDestroyed,
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
      unsubscribe = deps.sources.onChange(() => startCtx.requestSync('cluster changed'));
    },
    // Rules stay in the kernel when the agent stops: a restarted agent adopts them, and pods stay protected meanwhile.
    stop() {
      unsubscribe?.();
      unsubscribe = undefined;
    },
  });
}
