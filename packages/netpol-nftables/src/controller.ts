import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { createSyncController, SyncFailures, messageOf } from '@kube-router/controller';
import type { Controller, PluginContext } from '@kube-router/controller';
import { Mutex, Nft } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { nodePodCidrs } from '@kube-router/kube';
import type { NodePodCidrSource } from '@kube-router/kube';
import { PolicyCompiler, policyProblemReports } from '@kube-router/netpol';
import type { IpFamily, NamespaceLike, NetworkPolicyLike, PodLike, PolicyModel } from '@kube-router/netpol';
import { removeIptablesLeftovers } from './iptables-leftovers.js';
import { KernelApplier } from './kernel.js';
import type { ApplyResult } from './kernel.js';
import { NetpolNftablesMetrics } from './metrics.js';
import type { ResolvedNetpolNftablesOptions } from './options.js';
import { cidrFamily, renderNode } from './render-node.js';
import { renderPolicy } from './render-policy.js';
import type { PolicyRender } from './render-policy.js';

/** The controller name of either netpol backend: one health check, one metrics label, whichever runs. */
export const NETPOL_CONTROLLER = 'netpol';

/** Where the controller reads the cluster from: the agent's informers, or anything shaped like them. */
export interface NetpolSources {
  pods(): readonly PodLike[];
  namespaces(): readonly NamespaceLike[];
  policies(): readonly NetworkPolicyLike[];
  /** This node's Node object (its pod CIDRs), undefined until known. */
  node(): NodePodCidrSource | undefined;
  /** False until every source has loaded its first list: a sync before that would open every pod. */
  hasSynced(): boolean;
  onChange(handler: () => void): () => void;
  /** Records a Warning event on a NetworkPolicy. */
  warnPolicy(namespace: string, name: string, reason: string, message: string): void;
}

export interface NetpolControllerDeps {
  readonly sources: NetpolSources;
  readonly runner: CommandRunner;
}

/** Rendering yields to the event loop after this much work, so that /healthz and informers keep answering. */
const SLICE_MS = 10;

export function createNetpolNftablesController(
  ctx: PluginContext,
  deps: NetpolControllerDeps,
  options: ResolvedNetpolNftablesOptions,
): Controller {
  const families: IpFamily[] = [];
  if (options.enableIpv4) families.push('ipv4');
  if (options.enableIpv6) families.push('ipv6');
  if (families.length === 0) throw new Error('netpol: enableIpv4 and enableIpv6 are both false');
  const ranges = [...options.serviceClusterIpRanges, ...options.serviceExternalIpRanges, ...options.serviceLoadBalancerIpRanges];
  for (const range of ranges) cidrFamily(range);

  const metrics = new NetpolNftablesMetrics(ctx.metrics.registry);
  const nft = new Nft({ runner: deps.runner, ...(options.netns === undefined ? {} : { netns: options.netns }), timeoutMs: options.commandTimeoutMs });
  const applier = new KernelApplier({ families, nft, logger: ctx.logger, timings: metrics });
  const compiler = new PolicyCompiler({ nodeName: ctx.nodeName });
  const renders = new Map<string, PolicyRender>();
  const reported = new Set<string>();
  const exclusive = new Mutex();
  let leftoversRemoved = !options.removeIptablesLeftovers;
  let unsubscribe: (() => void) | undefined;

  const renderPolicies = async (model: PolicyModel, progress: () => void): Promise<PolicyRender[]> => {
    const result: PolicyRender[] = [];
    const current = new Set<string>();
    let sliceStart = performance.now();
    for (const policy of model.policies) {
      current.add(policy.id);
      let render = renders.get(policy.id);
      if (render?.fingerprint !== policy.fingerprint) {
        render = renderPolicy(policy, families);
        renders.set(policy.id, render);
      }
      result.push(render);
      if (performance.now() - sliceStart > SLICE_MS) {
        await yieldToEventLoop();
        progress();
        sliceStart = performance.now();
      }
    }
    for (const id of renders.keys()) if (!current.has(id)) renders.delete(id);
    return result;
  };

  const report = (seen: Set<string>, policyId: string, reason: string, message: string) => {
    const key = `${policyId}\0${reason}\0${message}`;
    seen.add(key);
    if (reported.has(key)) return;
    reported.add(key);
    const [namespace = '', name = ''] = policyId.split('/');
    deps.sources.warnPolicy(namespace, name, reason, message);
  };

  const sync = async (progress: () => void, signal: AbortSignal, reason: string): Promise<void> => {
    if (!deps.sources.hasSynced()) {
      throw new Error('informer caches have not synced: refusing to program rules from an incomplete view');
    }
    const failures = new SyncFailures();
    const started = performance.now();
    let podCidrs: string[] = [];
    if (options.defaultDeny) {
      try {
        podCidrs = nodePodCidrs(deps.sources.node());
        if (podCidrs.length === 0) throw new Error(`node ${ctx.nodeName} has no pod CIDRs (spec.podCIDRs or kube-router.io/pod-cidrs)`);
      } catch (error) {
        // Nothing to guard with: the rest is still programmed, and the sync fails so that the operator sees it.
        failures.add('default-deny', error);
      }
    }
    const model = compiler.compile({
      pods: deps.sources.pods(),
      namespaces: deps.sources.namespaces(),
      policies: deps.sources.policies(),
    });
    progress();
    const policyRenders = await renderPolicies(model, progress);
    const computeSeconds = (performance.now() - started) / 1000;
    metrics.computeTime.observe(computeSeconds);
    signal.throwIfAborted();

    // Periodic syncs read the tables back to repair drift; triggered ones trust what they wrote.
    if (reason === 'periodic' || reason === 'initial') applier.invalidate();
    const nodeOptions = { ...options, podCidrs };
    const applyStarted = performance.now();
    const result = await applier.apply(
      { policies: policyRenders, renderNode: (family, failed) => renderNode(model, family, nodeOptions, failed) },
      progress,
    );
    metrics.policyChainsSyncTime.observe((performance.now() - applyStarted) / 1000);

    // Our tables enforce now: what the iptables backend left can go without a moment of no enforcer.
    if (!leftoversRemoved && result.nodeFailure === undefined) {
      try {
        const removed = await removeIptablesLeftovers({
          runner: deps.runner,
          families,
          backend: options.iptablesBackend,
          ...(options.netns === undefined ? {} : { netns: options.netns }),
          timeoutMs: options.commandTimeoutMs,
        });
        leftoversRemoved = true;
        if (removed > 0) ctx.logger.info({ removed }, 'removed the iptables netpol backend leftovers');
      } catch (error) {
        failures.add('iptables-leftovers', error);
      }
    }

    const seen = new Set<string>();
    const failedClosed = reportProblems(model, failures, (id, why, message) => report(seen, id, why, message));
    recordApplyFailures(result, failures, failedClosed, (id, why, message) => report(seen, id, why, message));
    for (const key of [...reported]) if (!seen.has(key)) reported.delete(key);

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
      unsubscribe = deps.sources.onChange(() => startCtx.requestSync('cluster changed'));
    },
    // The tables stay when the agent stops: a restarted agent adopts them, and pods stay protected meanwhile.
    stop() {
      unsubscribe?.();
      unsubscribe = undefined;
    },
  });
}

/** Joins invalid policies (those selecting local pods) into the sync error; returns the ids failed closed. */
function reportProblems(
  model: PolicyModel,
  failures: SyncFailures,
  report: (policyId: string, reason: string, message: string) => void,
): Set<string> {
  const failedClosed = new Set<string>();
  for (const problem of policyProblemReports(model)) {
    if (problem.failsClosed) {
      failedClosed.add(problem.policy);
      failures.add(`policy/${problem.policy}`, new Error(problem.message));
    }
    report(problem.policy, problem.reason, problem.message);
  }
  return failedClosed;
}

function recordApplyFailures(
  result: ApplyResult,
  failures: SyncFailures,
  failedClosed: Set<string>,
  report: (policyId: string, reason: string, message: string) => void,
): void {
  for (const [id, error] of result.failedPolicies) {
    failedClosed.add(id);
    failures.add(`policy/${id}`, error);
    report(id, 'NetworkPolicyNotProgrammed', `the kernel refused the policy's rules, its pods fail closed: ${messageOf(error)}`);
  }
  if (result.nodeFailure !== undefined) failures.add('dispatch', result.nodeFailure);
  for (const [object, error] of result.staleFailures) failures.add(`stale/${object}`, error);
}
