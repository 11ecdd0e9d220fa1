import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { createSyncController, SyncFailures, messageOf } from '@kube-router/controller';
import type { Controller, PluginContext } from '@kube-router/controller';
import { Ipset, Iptables, Mutex } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { PolicyCompiler } from '@kube-router/netpol';
import type {
  IpFamily,
  NamespaceLike,
  NetworkPolicyLike,
  PodLike,
  PolicyModel,
  PolicyProblem,
} from '@kube-router/netpol';
import { KernelApplier } from './kernel.js';
import type { ApplyResult, DesiredState } from './kernel.js';
import { NetpolMetrics } from './metrics.js';
import type { ResolvedNetpolIptablesOptions } from './options.js';
import { cidrFamily, renderNode } from './render-node.js';
import { renderPolicy } from './render-policy.js';
import type { PolicyRender } from './render-policy.js';

export const NETPOL_CONTROLLER = 'netpol';

/** Where the controller reads the cluster from: the agent's informers, or anything shaped like them. */
export interface NetpolSources {
  pods(): readonly PodLike[];
  namespaces(): readonly NamespaceLike[];
  policies(): readonly NetworkPolicyLike[];
  /** False until every source has loaded its first list: a sync before that would open every pod. */
  hasSynced(): boolean;
  /** Calls `handler` after pods, namespaces or policies changed; returns a function that removes it. */
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

export function createNetpolController(
  ctx: PluginContext,
  deps: NetpolControllerDeps,
  options: ResolvedNetpolIptablesOptions,
): Controller {
  const families: IpFamily[] = [];
  if (options.enableIpv4) families.push('ipv4');
  if (options.enableIpv6) families.push('ipv6');
  if (families.length === 0) throw new Error('netpol: enableIpv4 and enableIpv6 are both false');
  // Fail at start on a bad range rather than at the first sync.
  for (const range of [...options.serviceClusterIpRanges, ...options.serviceExternalIpRanges]) cidrFamily(range);

  const metrics = new NetpolMetrics(ctx.metrics.registry);
  const iptables: Partial<Record<IpFamily, Iptables>> = {};
  for (const family of families) {
    iptables[family] = new Iptables({
      runner: deps.runner,
      family,
      backend: options.iptablesBackend,
      netns: options.netns,
      timeoutMs: options.commandTimeoutMs,
    });
  }
  const applier = new KernelApplier({
    families,
    iptables,
    ipset: new Ipset({ runner: deps.runner, netns: options.netns, timeoutMs: options.commandTimeoutMs }),
    logger: ctx.logger,
    timings: metrics,
  });
  const compiler = new PolicyCompiler({ nodeName: ctx.nodeName });
  const renders = new Map<string, PolicyRender>();
  const reported = new Set<string>();
  const exclusive = new Mutex();
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
    const started = performance.now();
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

    // Periodic syncs re-read the kernel to repair drift; triggered ones trust what they wrote.
    if (reason === 'periodic' || reason === 'initial') applier.invalidate();
    const desired: DesiredState = {
      policies: policyRenders,
      renderNode: (family, failed) => renderNode(model, family, options, failed),
    };
    const applyStarted = performance.now();
    const result = await applier.apply(desired, progress);
    metrics.policyChainsSyncTime.observe((performance.now() - applyStarted) / 1000);

    const failures = new SyncFailures();
    const seen = new Set<string>();
    const failedClosed = reportProblems(model, failures, (id, why, message) => report(seen, id, why, message));
    recordApplyFailures(result, failures, failedClosed, (id, why, message) => report(seen, id, why, message));
    for (const key of [...reported]) if (!seen.has(key)) reported.delete(key);

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

/** Joins invalid policies (those selecting local pods) into the sync error; returns the ids failed closed. */
function reportProblems(
  model: PolicyModel,
  failures: SyncFailures,
  report: (policyId: string, reason: string, message: string) => void,
): Set<string> {
  const local = new Set(model.policies.map((policy) => policy.id));
  const byPolicy = new Map<string, PolicyProblem[]>();
  for (const problem of model.problems) {
    if (!local.has(problem.policy)) continue;
    let list = byPolicy.get(problem.policy);
    if (!list) byPolicy.set(problem.policy, (list = []));
    list.push(problem);
  }
  const failedClosed = new Set<string>();
  for (const [id, problems] of byPolicy) {
    const describe = (p: PolicyProblem) => `${p.path}: ${p.message}`;
    const errors = problems.filter((p) => p.severity === 'error');
    const warnings = problems.filter((p) => p.severity === 'warning');
    if (errors.length > 0) {
      failedClosed.add(id);
      const directions = [...new Set(errors.map((p) => p.direction ?? 'ingress and egress'))].join(', ');
      const message = `invalid network policy, its pods fail closed (${directions}): ${errors.map(describe).join('; ')}`;
      failures.add(`policy/${id}`, new Error(message));
      report(id, 'InvalidNetworkPolicy', message);
    }
    if (warnings.length > 0) report(id, 'NetworkPolicyWarning', warnings.map(describe).join('; '));
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
  for (const [family, error] of result.nodeFailures) failures.add(`node/${family}`, error);
  for (const [set, error] of result.setFailures) failures.add(`ipset/${set}`, error);
  for (const [chains, error] of result.chainFailures) failures.add(`stale-chains/${chains}`, error);
}
