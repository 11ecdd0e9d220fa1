import { createSyncController, SyncFailures, SyncWarnings } from '@kube-router/controller';
import type { Controller, PluginContext, SyncContext } from '@kube-router/controller';
import { PolicyCompiler } from '../compiler.js';
import type { NetpolDataplane } from './dataplane.js';
import type { DropLog } from './drop-log.js';
import { createExplainService, netpolExplainServiceKey } from './explain-service.js';
import type { AppliedModel } from './explain-service.js';
import type { ResolvedNetpolOptions } from './options.js';
import type { NetpolSources } from './sources.js';
import { VerdictCounters } from './verdict-counters.js';
import {
  DefaultDenyPodCidrs,
  NETPOL_CONTROLLER,
  PolicyRenders,
  reportPolicyProblems,
  reportRefusedPolicies,
} from './sync.js';
import { TwoPhaseApply } from './two-phase-apply.js';

export interface NetpolControllerDeps {
  readonly sources: NetpolSources;
  /** --netpol-drop-log: started and stopped with the controller. */
  readonly dropLog?: DropLog;
}

/** What the controller reads of a backend's options: the options every backend shares. */
export type NetpolControllerOptions = Pick<ResolvedNetpolOptions, 'defaultDeny' | 'syncPeriodMs' | 'minSyncIntervalMs' | 'syncTimeoutMs'> &
  Partial<Pick<ResolvedNetpolOptions, 'isolateUnselectedPods'>>;

/**
 * The `netpol` controller of any backend: one sync is the informers' check, default deny's pod CIDRs, the compile (in
 * slices), the policies' renders (kept while a policy is unchanged), the two-phase apply through `dataplane`, the
 * leftovers, Warning events and failures, metrics and a debug line. A change to how NetworkPolicies are handled is
 * made here once, for both backends; a dataplane holds only what differs between them.
 */
export function createNetpolController<PolicyRender extends { readonly id: string }, NodeRender>(
  ctx: PluginContext,
  deps: NetpolControllerDeps,
  options: NetpolControllerOptions,
  dataplane: NetpolDataplane<PolicyRender, NodeRender>,
): Controller {
  const { sources } = deps;
  const { metrics } = dataplane;
  const compiler = new PolicyCompiler({ nodeName: ctx.nodeName });
  const renders = new PolicyRenders((policy) => dataplane.renderPolicy(policy));
  const warnings = new SyncWarnings((...args) => sources.warnPolicy(...args));
  const defaultDenyCidrs = new DefaultDenyPodCidrs();
  const twoPhases = new TwoPhaseApply();
  let unsubscribe: (() => void) | undefined;
  const { readCounters } = dataplane;
  const verdictCounters = readCounters && new VerdictCounters(ctx.metrics.registry, () => readCounters.call(dataplane), { logger: ctx.logger });
  /** What the kernel holds now, for explain: set once each sync's apply is done. */
  let lastApplied: AppliedModel | undefined;
  // One netpol controller per agent; a second (a backend switch test's other plugin) leaves the first's in place.
  if (!ctx.services.has(netpolExplainServiceKey)) {
    ctx.services.provide(netpolExplainServiceKey, createExplainService(ctx.nodeName, sources, options, () => lastApplied));
  }

  /** A compile from changes builds on the last one: after a compile that threw, the next reads the full lists. */
  let changesUsable = false;
  /**
   * A sync an event triggered compiles only the objects that changed since the last sync, so that it costs what the
   * event changed rather than what the cluster holds; full syncs (initial, periodic, retry) compile the full lists, as
   * does any sync whose changes are not known. In slices: a full compile of a large cluster would otherwise hold the
   * event loop for seconds (/healthz, watches).
   */
  const compile = async (full: boolean) => {
    // Taken on every sync, so that a full one starts the next changes from its own read of the lists.
    const changes = sources.takeChanges?.();
    const incremental = !full && changes !== undefined && changesUsable && compiler.hasCompiled;
    changesUsable = false;
    const model = incremental
      ? await compiler.compileChangesAsync(changes)
      : await compiler.compileAsync({ pods: sources.pods(), namespaces: sources.namespaces(), policies: sources.policies() });
    changesUsable = sources.takeChanges !== undefined;
    metrics.compiles.inc({ input: incremental ? 'changes' : 'lists' });
    return model;
  };

  const compileAndRender = async (started: number, full: boolean, progress: () => void) => {
    const model = await compile(full);
    progress();
    const policies = await renders.update(model, progress);
    const computeSeconds = (performance.now() - started) / 1000;
    metrics.computeTime.observe(computeSeconds);
    return { model, policies, computeSeconds };
  };

  const sync = async ({ reason, full, progress, signal, driftRepaired }: SyncContext): Promise<void> => {
    if (!sources.hasSynced()) {
      throw new Error('informer caches have not synced: refusing to program rules from an incomplete view');
    }
    const started = performance.now();
    const failures = new SyncFailures();
    const podCidrs = options.defaultDeny ? defaultDenyCidrs.read(sources, ctx.nodeName, failures) : [];
    // Reading the kernel back and what must go before the write are other processes: they run while the policies
    // compile, on another core, instead of after. Awaited even after a compile that threw: never two syncs' kernel
    // work at once.
    const preparing = dataplane.prepare({ full, failures });
    const { model, policies, computeSeconds } = await compileAndRender(started, full, progress).finally(() => preparing);
    signal.throwIfAborted();

    const applyStarted = performance.now();
    const applied = await twoPhases.run(
      dataplane,
      policies,
      (failedPolicies) => dataplane.renderNode(model, { podCidrs, failedPolicies }),
      progress,
    );
    metrics.policyChainsSyncTime.observe((performance.now() - applyStarted) / 1000);
    lastApplied = {
      model,
      failedPolicies: new Set(applied.failedPolicies.keys()),
      appliedAt: new Date(),
      writeFailures: [...applied.node.failures.keys()],
      ...(options.defaultDeny ? { defaultDeny: { podCidrs } } : {}),
    };
    verdictCounters?.update(model, new Set(applied.failedPolicies.keys()));
    for (const [kind, names] of Object.entries(dataplane.takeDrift())) driftRepaired(kind, names);
    await dataplane.removeLeftovers({ full, failures }, applied.node.enforcing);

    warnings.beginSync();
    const failedClosed = reportPolicyProblems(model, failures, warnings);
    reportRefusedPolicies(applied.failedPolicies, failures, failedClosed, warnings);
    warnings.endSync();
    for (const [what, error] of applied.node.failures) failures.add(what, error);

    metrics.recordObjects(dataplane.counts());
    metrics.failedPolicies.set(failedClosed.size);
    metrics.syncTime.observe((performance.now() - started) / 1000);
    ctx.logger.debug(
      {
        reason,
        computeMs: Math.round(computeSeconds * 1000),
        totalMs: Math.round(performance.now() - started),
        policies: model.policies.length,
        pods: model.pods.length,
        ...applied.node.written,
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
    sync,
    start(startCtx) {
      dataplane.start?.();
      unsubscribe = sources.onChange(() => startCtx.requestSync('cluster changed'));
      deps.dropLog?.start();
    },
    // The rules stay in the kernel when the agent stops: a restarted agent adopts them, and pods stay protected meanwhile.
    async stop() {
      unsubscribe?.();
      unsubscribe = undefined;
      dataplane.stop?.();
      await deps.dropLog?.stop();
    },
  });
}
