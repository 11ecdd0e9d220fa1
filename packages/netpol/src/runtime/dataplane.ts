import type { SyncFailures } from '@kube-router/controller';
import type { CompiledPolicy, IpFamily, PolicyModel } from '../model.js';
import type { NetpolObjectCounts, NetpolSyncMetrics } from './metrics.js';
import type { TwoPhaseKernel } from './two-phase-apply.js';
import type { ChainVerdictCounter } from './verdict-counters.js';

/** What one policy puts in the kernel for one family: its chains and its sets, in a backend's own form. */
export interface PolicyFamilyObjects<Chain, Set> {
  readonly chains: readonly Chain[];
  readonly sets: readonly Set[];
}

/** One policy rendered for every enabled family that has its targets. */
export interface NetpolPolicyRender<Chain, Set> {
  /** The policy's id, `namespace/name`. */
  readonly id: string;
  readonly families: Partial<Record<IpFamily, PolicyFamilyObjects<Chain, Set>>>;
}

/** What the node's objects (pod chains, dispatch, default deny) are rendered from, besides the model. */
export interface NodeRenderInput {
  /** This node's pod CIDRs, either family, for --netpol-default-deny; empty without it. */
  readonly podCidrs: readonly string[];
  /** Policies whose objects the kernel refused: their targets fail closed as if the policy had not compiled. */
  readonly failedPolicies: ReadonlySet<string>;
}

/** How the node's part of an apply ended. */
export interface NodeApplied {
  /**
   * The node's objects are in the kernel as rendered: this backend enforces, so what must not stay beside it (the
   * other backend's objects, a disabled family's) may go now without a moment of no enforcer.
   */
  readonly enforcing: boolean;
  /** What failed, by the name it is joined under in the sync error (`node/ipv4`, `stale/ipv4/KUBE-...`). */
  readonly failures: ReadonlyMap<string, unknown>;
  /** How much the whole apply wrote and removed, by a name of the backend's choosing: for the sync's debug line. */
  readonly written: Readonly<Record<string, number>>;
}


/** What a dataplane hook of one sync gets. */
export interface DataplaneSync {
  /** A full sync (initial, periodic, retry): read the kernel back rather than trust what was written last. */
  readonly full: boolean;
  /** The sync's failures: a hook joins what it could not do here, under a name of its own, and carries on. */
  readonly failures: SyncFailures;
}

/**
 * What a netpol backend brings to the controller (createNetpolController): how it renders policies and the node, how
 * it writes them to the kernel in two phases, and what it does around that. Everything else of a sync (the informers'
 * sync check, default deny's pod CIDRs, the compile, the policy renders kept across syncs, warnings, failures,
 * metrics, the log) is the controller's, the same for every backend.
 *
 * The two phases (TwoPhaseKernel): `applyPolicies` writes the policies and says which the kernel refused;
 * `applyNode` then writes the node's objects rendered with those refused policies failed closed. The controller
 * renders both; nothing calls back into it while the kernel is written.
 */
export interface NetpolDataplane<PolicyRender extends { readonly id: string }, NodeRender>
  extends TwoPhaseKernel<PolicyRender, NodeRender, NodeApplied> {
  /** The backend's metrics: kube-router's netpol series and its own. */
  readonly metrics: NetpolSyncMetrics;
  /** One compiled policy for the enabled families; the controller keeps it while the policy is unchanged. */
  renderPolicy(policy: CompiledPolicy): PolicyRender;
  /** The node's objects. Cheap to call: a backend renders what it needs when the apply reads it. */
  renderNode(model: PolicyModel, input: NodeRenderInput): NodeRender;
  /**
   * Begins with the sync and runs beside the compile, awaited before the first write: read the kernel back when the
   * sync is full, remove what must go before the write. Never rejects: failures join `sync.failures`.
   */
  prepare(sync: DataplaneSync): Promise<void>;
  /** After the apply: remove the other backend's objects and a disabled family's, once `enforcing`. Never rejects. */
  removeLeftovers(sync: DataplaneSync, enforcing: boolean): Promise<void>;
  counts(): NetpolObjectCounts;
  /**
   * The objects of ours that the last read-back found changed or gone though this backend had written them (by kind:
   * `chain`, `ipset`, `set`), and that this sync wrote again; each call hands them over once. The controller reports
   * them as drift (kube_router_controller_drift_repaired_total).
   */
  takeDrift(): Readonly<Record<string, readonly string[]>>;
  /**
   * The kernel's counters of our verdict rules, for kube_router_netpol_policy_*_total (VerdictCounters): the accepting
   * rules of policy chains, the rejects of pod chains and of the tail chain. Read when Prometheus scrapes, not in a
   * sync. A backend without it reports no verdict counters.
   */
  readCounters?(): Promise<readonly ChainVerdictCounter[]>;
  /** When the controller starts (its informers are only beginning to list the cluster). */
  start?(): void;
  /** When the controller stops; the kernel's objects stay, for a restarted agent to adopt. */
  stop?(): void;
}
