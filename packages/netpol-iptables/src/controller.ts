import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { createSyncController, SyncFailures, messageOf } from '@kube-router/controller';
import type { Controller, PluginContext } from '@kube-router/controller';
import { FailFastSession, Ipset, Iptables, Mutex } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { nodePodCidrs } from '@kube-router/kube';
import type { NodePodCidrSource } from '@kube-router/kube';
import { PolicyCompiler, policyProblemReports } from '@kube-router/netpol';
import type {
  IpFamily,
  NamespaceLike,
  NetworkPolicyLike,
  PodLike,
  PolicyModel,
} from '@kube-router/netpol';
import { KernelApplier } from './kernel.js';
import type { ApplyResult, DesiredState } from './kernel.js';
import { NetpolMetrics } from './metrics.js';
import type { ResolvedNetpolIptablesOptions } from './options.js';
import { removeNftablesLeftovers } from './nftables-leftovers.js';
import { cidrFamily, renderLocalPodsSet, renderNode } from './render-node.js';
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
  /** This node's Node object, for its pod CIDRs (--netpol-default-deny); undefined until known. */
  node?(): NodePodCidrSource | undefined;
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
  const renders = new Map<string, PolicyRender>();
  const reported = new Set<string>();
  const exclusive = new Mutex();
  let unsubscribe: (() => void) | undefined;
  let nftablesLeftoversRemoved = false;

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
    const failures = new SyncFailures();
    let podCidrs: string[] = [];
    if (options.defaultDeny) {
      try {
        podCidrs = nodePodCidrs(deps.sources.node?.());
        if (podCidrs.length === 0) throw new Error(`node ${ctx.nodeName} has no pod CIDRs (spec.podCIDRs or kube-router.io/pod-cidrs)`);
      } catch (error) {
        // Nothing to guard with: everything else is still programmed, and the sync fails so that the operator sees it.
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

    // Periodic syncs re-read the kernel to repair drift; triggered ones trust what they wrote.
    if (reason === 'periodic' || reason === 'initial') applier.invalidate();
    const desired: DesiredState = {
      policies: policyRenders,
      renderNode: (family, failed) => renderNode(model, family, { ...options, podCidrs }, failed),
      nodeSets: options.defaultDeny ? families.map((family) => renderLocalPodsSet(model, family)) : [],
    };
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
  for (const [family, error] of result.nodeFailures) failures.add(`node/${family}`, error);
  for (const [set, error] of result.setFailures) failures.add(`ipset/${set}`, error);
  for (const [chains, error] of result.chainFailures) failures.add(`stale-chains/${chains}`, error);
}
