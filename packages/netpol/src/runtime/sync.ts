import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { messageOf } from '@kube-router/controller';
import type { SyncFailures, SyncWarnings } from '@kube-router/controller';
import { nodePodCidrs } from '@kube-router/kube';
import type { CompiledPolicy, PolicyModel } from '../model.js';
import { policyProblemReports } from '../problem-reports.js';
import type { NetpolSources } from './sources.js';

/** The controller name of either netpol backend: one health check, one metrics label, whichever runs. */
export const NETPOL_CONTROLLER = 'netpol';

/** Rendering yields to the event loop after this much work, so that /healthz and informers keep answering. */
const SLICE_MS = 10;

/**
 * A backend's renders of the compiled policies, each kept while the policy stays the same object or one with the same
 * fingerprint: an unchanged policy keeps its render object, which the backends' appliers use to skip it without
 * comparing what it holds.
 */
export class PolicyRenders<Render> {
  readonly #render: (policy: CompiledPolicy) => Render;
  /** Each render with the policy object it was made from (or, later, an equal one that replaced it). */
  readonly #renders = new Map<string, { policy: CompiledPolicy; render: Render }>();

  constructor(render: (policy: CompiledPolicy) => Render) {
    this.#render = render;
  }

  /** The renders of the model's policies, in its order; forgets those of policies gone. */
  async update(model: PolicyModel, progress: () => void): Promise<Render[]> {
    const result: Render[] = [];
    const current = new Set<string>();
    let sliceStart = performance.now();
    for (const policy of model.policies) {
      current.add(policy.id);
      let entry = this.#renders.get(policy.id);
      // The same object is the same policy; only a recompiled one has its fingerprint (and its old one's) worked out.
      if (entry === undefined || (entry.policy !== policy && entry.policy.fingerprint !== policy.fingerprint)) {
        entry = { policy, render: this.#render(policy) };
        this.#renders.set(policy.id, entry);
      } else {
        entry.policy = policy;
      }
      result.push(entry.render);
      if (performance.now() - sliceStart > SLICE_MS) {
        await yieldToEventLoop();
        progress();
        sliceStart = performance.now();
      }
    }
    for (const id of this.#renders.keys()) if (!current.has(id)) this.#renders.delete(id);
    return result;
  }
}

/** Joins invalid policies (those selecting local pods) into the sync error and warns; returns the ids failed closed. */
export function reportPolicyProblems(model: PolicyModel, failures: SyncFailures, warnings: SyncWarnings): Set<string> {
  const failedClosed = new Set<string>();
  for (const problem of policyProblemReports(model)) {
    if (problem.failsClosed) {
      failedClosed.add(problem.policy);
      failures.add(`policy/${problem.policy}`, new Error(problem.message));
    }
    warnings.warn(problem.policy, problem.reason, problem.message);
  }
  return failedClosed;
}

/** Policies the kernel refused: their pods were failed closed; each is a failure of the sync and a Warning event. */
export function reportRefusedPolicies(
  refused: ReadonlyMap<string, unknown>,
  failures: SyncFailures,
  failedClosed: Set<string>,
  warnings: SyncWarnings,
): void {
  for (const [id, error] of refused) {
    failedClosed.add(id);
    failures.add(`policy/${id}`, error);
    warnings.warn(id, 'NetworkPolicyNotProgrammed', `the kernel refused the policy's rules, its pods fail closed: ${messageOf(error)}`);
  }
}

/**
 * This node's pod CIDRs for --netpol-default-deny, read on each sync. Without any there is nothing to guard with: the
 * failure joins the sync's (so the operator sees it) and everything else is still programmed. Once read, they are
 * kept through a sync that cannot read them (the Node object gone from the cache for a moment, an annotation edited
 * badly): a node's pod CIDRs do not change, and writing the tail without them would let unprogrammed pods through,
 * failing open on a failure.
 */
export class DefaultDenyPodCidrs {
  #lastRead: readonly string[] = [];

  read(sources: NetpolSources, nodeName: string, failures: SyncFailures): readonly string[] {
    try {
      const cidrs = nodePodCidrs(sources.node?.());
      if (cidrs.length === 0) throw new Error(`node ${nodeName} has no pod CIDRs (spec.podCIDRs or kube-router.io/pod-cidrs)`);
      this.#lastRead = cidrs;
      return cidrs;
    } catch (error) {
      const kept = this.#lastRead.length > 0;
      const reported = kept ? new Error(`${messageOf(error)}; the pod CIDRs last read (${this.#lastRead.join(', ')}) still apply`, { cause: error }) : error;
      failures.add('default-deny', reported);
      return this.#lastRead;
    }
  }
}
