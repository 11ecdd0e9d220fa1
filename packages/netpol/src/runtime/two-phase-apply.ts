/** How the policies' phase ended: the policies the kernel refused, with why; their targets fail closed. */
export interface PoliciesApplied {
  readonly failedPolicies: ReadonlyMap<string, unknown>;
}

/** The kernel side of a netpol backend, written in two phases: the policies, then the node's objects. */
export interface TwoPhaseKernel<PolicyRender, NodeRender, NodeResult extends { readonly enforcing: boolean }> {
  /**
   * Writes the policies, and says which ones the kernel refused. `node` is the node's render with the policies that
   * failed in the last sync still failed closed: a backend that writes a table in one transaction sends it with the
   * policies, so that a sync where nothing new fails is one transaction, and one whose policy is still refused never
   * lets that policy's targets through; a backend that writes the node apart ignores it.
   */
  applyPolicies(policies: readonly PolicyRender[], node: NodeRender, progress: () => void): Promise<PoliciesApplied>;
  /** Writes the node's objects as rendered with this sync's refused policies failed closed, then removes what is stale. */
  applyNode(node: NodeRender, progress: () => void): Promise<NodeResult>;
}

/**
 * One sync's two-phase apply, and the one thing it keeps between syncs: which policies the node's objects in the
 * kernel fail closed. Their targets stay closed in the first phase's render while the policy is still refused, and
 * come out in the second once it goes in.
 */
export class TwoPhaseApply {
  #failedBefore: ReadonlySet<string> = new Set();

  async run<PolicyRender, NodeRender, NodeResult extends { readonly enforcing: boolean }>(
    kernel: TwoPhaseKernel<PolicyRender, NodeRender, NodeResult>,
    policies: readonly PolicyRender[],
    renderNode: (failedPolicies: ReadonlySet<string>) => NodeRender,
    progress: () => void = () => undefined,
  ): Promise<{ readonly failedPolicies: ReadonlyMap<string, unknown>; readonly node: NodeResult }> {
    const assumed = renderNode(this.#failedBefore);
    const { failedPolicies } = await kernel.applyPolicies(policies, assumed, progress);
    const failed = new Set(failedPolicies.keys());
    const sameAsAssumed = failed.size === this.#failedBefore.size && [...failed].every((id) => this.#failedBefore.has(id));
    const node = await kernel.applyNode(sameAsAssumed ? assumed : renderNode(failed), progress);
    // Not written as rendered, the node's objects in the kernel may still fail closed what failed before as well.
    this.#failedBefore = node.enforcing ? failed : new Set([...this.#failedBefore, ...failed]);
    return { failedPolicies, node };
  }
}

/**
 * What a kernel's policies' phase leaves for its node's phase, within one sync. A node's phase without the policies'
 * phase before it is a bug of the caller: the node would be written against policies it never saw.
 */
export class PhaseHandOff<State> {
  #state: State | undefined;

  /** At the end of the policies' phase. */
  hand(state: State): void {
    this.#state = state;
  }

  /** At the start of the node's phase: what the policies' phase left, once. */
  take(): State {
    const state = this.#state;
    if (state === undefined) throw new Error('a node phase without the policies phase before it');
    this.#state = undefined;
    return state;
  }

  /** At the start of the policies' phase: forgets what a sync that stopped half-way left. */
  clear(): void {
    this.#state = undefined;
  }
}
