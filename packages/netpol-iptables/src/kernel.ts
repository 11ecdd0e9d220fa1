import { hash } from 'node:crypto';
import { PhaseHandOff } from '@kube-router/netpol';
import type { IpFamily, PoliciesApplied } from '@kube-router/netpol';
import { IpsetScript, renderIptablesRestore } from '@kube-router/netfilter';
import type { Ipset, Iptables, SavedRule } from '@kube-router/netfilter';
import type { Logger } from 'pino';
import { BUILTIN_CHAINS, TEMP_SET, TOP_CHAINS, isOwnChain, isOwnSet, type BuiltinChain } from './names.js';
import { renderSharedChains } from './render-node.js';
import type { PolicyRender } from './render-policy.js';
import { comment, ipset, setDigest } from './rules.js';
import type { ChainRender, SetRender } from './rules.js';

/** The node's objects of one family: what does not belong to one policy. */
export interface NodeFamilyRender {
  /** The top-level, shared, tail and pod chains. */
  readonly chains: readonly ChainRender[];
  /**
   * The local pods set of --netpol-default-deny: created empty before the node chains that match on it, filled once
   * they are in place, so that a pod enters it only when its rules are programmed.
   */
  readonly localPods?: SetRender;
}

/** The node's objects, per enabled family. */
export type NodeRender = Readonly<Partial<Record<IpFamily, NodeFamilyRender>>>;

export interface ApplyResult {
  /** Policies whose sets or chains the kernel refused, with why; their targets were failed closed. */
  readonly failedPolicies: ReadonlyMap<string, unknown>;
  /** Node-wide failures (a family's top-level or pod chains could not be written), by family. */
  readonly nodeFailures: ReadonlyMap<IpFamily, unknown>;
  /** Stale sets the kernel would not destroy (still referenced by someone), by name; retried next sync. */
  readonly setFailures: ReadonlyMap<string, unknown>;
  /** Stale chains the kernel would not delete, by `<family>/<names>`; retried next sync. */
  readonly chainFailures: ReadonlyMap<string, unknown>;
  /** Every family's node chains are in place as rendered. */
  readonly enforcing: boolean;
  readonly chainsWritten: number;
  readonly setsWritten: number;
  readonly chainsDeleted: number;
  readonly setsDestroyed: number;
}

/** What the policies' phase of an apply leaves for the node's phase. */
interface PendingApply {
  readonly policies: readonly PolicyRender[];
  readonly failed: Map<string, unknown>;
  readonly nodeFailures: Map<IpFamily, unknown>;
  chainsWritten: number;
  setsWritten: number;
}

export interface KernelTimings {
  save?(family: IpFamily, seconds: number): void;
  restore?(family: IpFamily, seconds: number): void;
  ipsetRestore?(family: IpFamily, seconds: number): void;
}

interface AppliedChain {
  /** `?` when the chain was found in the kernel and its content is not known to be ours as rendered now. */
  readonly digest: string;
  readonly ruleCount: number;
  /**
   * A hash of its rules as iptables-save printed them at the last read-back; undefined once we wrote the chain, until
   * the next read-back records what the kernel holds (iptables-save spells rules its own way, not as we render them).
   */
  readonly content?: string;
}

export interface KernelApplierOptions {
  readonly families: readonly IpFamily[];
  readonly iptables: Readonly<Partial<Record<IpFamily, Iptables>>>;
  readonly ipset: Ipset;
  readonly logger: Logger;
  readonly timings?: KernelTimings;
}

/**
 * Keeps our chains and sets in the kernel equal to the rendered ones while writing only what changed, in a sync's two
 * phases (TwoPhaseKernel): applyPolicies, then applyNode with the node rendered for the policies the first refused. It remembers
 * the digest of every chain and set it wrote; `refresh` re-reads the kernel (at start, periodically, after a
 * failure), so that a restarted agent adopts the objects in place (sets whose members already match are not
 * rewritten) and drift is repaired. Nothing is ever flushed up front: every write replaces a chain atomically with
 * its new content, so traffic never sees a chain empty.
 */
export class KernelApplier {
  readonly #options: KernelApplierOptions;
  readonly #chains = new Map<IpFamily, Map<string, AppliedChain>>();
  /** Per family and built-in chain: the jumps to our top-level chain, with their 1-based position and saved spec. */
  readonly #jumps = new Map<IpFamily, Map<BuiltinChain, { position: number; spec: string }[]>>();
  readonly #sets = new Map<string, string>();
  readonly #setFamilies = new Map<string, IpFamily>();
  /** Disabled families whose rules are gone (releaseFamily): their sets are ours to sweep. */
  readonly #released = new Set<IpFamily>();
  #tempSetExists = false;
  #fresh = false;
  /** Between a sync's two phases: what applyPolicies did, for applyNode. */
  readonly #pending = new PhaseHandOff<PendingApply>();
  /** Per family, the chains the last read-back found changed in place: once written again, they are read at once. */
  readonly #changedInPlace = new Map<IpFamily, Set<string>>();
  /** Chains changed in place and written again since, to be read back at the end of the apply (#recordRepaired). */
  #repaired = new Map<IpFamily, Set<string>>();
  /** What read-backs found changed or gone behind us since takeDrift last handed it over. */
  #drift = { chain: new Set<string>(), ipset: new Set<string>() };
  /**
   * Per `<family>/<chain>`, when we last wrote it (a sequence number): a write starts the kernel's rule counters again
   * at zero, and the verdict counters must know that it happened, not guess it from a lower value.
   */
  readonly #written = new Map<string, number>();
  #writes = 0;

  constructor(options: KernelApplierOptions) {
    this.#options = options;
    for (const family of options.families) {
      this.#chains.set(family, new Map());
      this.#jumps.set(family, new Map());
    }
  }

  /** Whether the next apply must re-read the kernel first. */
  get needsRefresh(): boolean {
    return !this.#fresh;
  }

  /**
   * When this applier last wrote each chain (a sequence number), by `<family>/<chain>`; a chain not written since the
   * agent started is not there. A copy: a reader of the kernel's counters takes it before and after its read, and
   * trusts only the chains whose write did not change in between.
   */
  chainWrites(): ReadonlyMap<string, number> {
    return new Map(this.#written);
  }

  invalidate(): void {
    this.#fresh = false;
  }

  /**
   * A family that is not enabled and whose rules of ours are gone: nothing matches on its sets any more, and the next
   * stale-set sweep destroys them with the others.
   */
  releaseFamily(family: IpFamily): void {
    if (!this.#options.families.includes(family)) this.#released.add(family);
  }

  /** Number of our chains and sets known to be in the kernel. */
  counts(): { chains: number; sets: number } {
    let chains = 0;
    for (const map of this.#chains.values()) chains += map.size;
    return { chains, sets: this.#sets.size };
  }

  /** Hands over, once, the chains and sets that read-backs found changed or gone though we had written them. */
  takeDrift(): { chain: string[]; ipset: string[] } {
    const drift = { chain: [...this.#drift.chain], ipset: [...this.#drift.ipset] };
    this.#drift = { chain: new Set(), ipset: new Set() };
    return drift;
  }

  /** Reads our chains, the jumps into them and our sets from the kernel. */
  async refresh(): Promise<void> {
    for (const family of this.#options.families) {
      const iptables = this.#iptables(family);
      const started = performance.now();
      const table = await iptables.saveParsed('filter');
      this.#options.timings?.save?.(family, (performance.now() - started) / 1000);
      const known = this.#chains.get(family) as Map<string, AppliedChain>;
      const next = new Map<string, AppliedChain>();
      const changedInPlace = new Set<string>();
      for (const saved of table.chains) {
        if (saved.builtin || !isOwnChain(saved.name)) continue;
        const previous = known.get(saved.name);
        const ruleCount = saved.rules.length;
        const content = contentOf(saved.rules);
        // A rule count that differs from what we wrote means someone changed the chain: write it again. So does a rule
        // replaced in place (`iptables -R`), which keeps the count: the rules differ from what the last read-back saw.
        if (previous && previous.ruleCount === ruleCount && (previous.content === undefined || previous.content === content)) {
          next.set(saved.name, { digest: previous.digest, ruleCount, content });
        } else if (previous?.content !== undefined && previous.ruleCount === ruleCount) {
          // Changed in place: it keeps the content it had until it is written, so that a write that fails leaves it
          // to be found changed again (and read back at once once written), not taken as it was left.
          changedInPlace.add(saved.name);
          next.set(saved.name, { digest: '?', ruleCount, content: previous.content });
        } else {
          next.set(saved.name, { digest: '?', ruleCount, content });
        }
      }
      if (changedInPlace.size > 0) {
        this.#options.logger.warn({ family, chains: [...changedInPlace] }, 'rules of our chains were changed in place by someone else');
      }
      // Drift: a chain we knew as written (a digest of ours) that is gone, or no longer what we wrote.
      for (const [name, before] of known) {
        if (before.digest === '?') continue;
        const now = next.get(name);
        if (!now || now.digest === '?') this.#drift.chain.add(`${family}/${name}`);
      }
      this.#changedInPlace.set(family, changedInPlace);
      this.#chains.set(family, next);
      for (const key of this.#written.keys()) if (key.startsWith(`${family}/`) && !next.has(key.slice(family.length + 1))) this.#written.delete(key);
      const jumps = new Map<BuiltinChain, { position: number; spec: string }[]>();
      for (const builtin of BUILTIN_CHAINS) {
        const rules = table.chains.find((candidate) => candidate.name === builtin)?.rules ?? [];
        jumps.set(
          builtin,
          rules.flatMap((rule, index) => (rule.target === TOP_CHAINS[builtin] ? [{ position: index + 1, spec: rule.spec }] : [])),
        );
      }
      this.#jumps.set(family, jumps);
    }
    const setsBefore = new Map(this.#sets);
    this.#sets.clear();
    this.#tempSetExists = false;
    for (const saved of (await this.#options.ipset.saveOwn(isOwnSet)).sets) {
      if (saved.name === TEMP_SET) this.#tempSetExists = true;
      else this.#sets.set(saved.name, setDigest(saved.type, saved.members));
      if (saved.family) this.#setFamilies.set(saved.name, saved.family);
    }
    // Drift: a set we knew (as written or as read) that is gone or holds other members now.
    for (const [name, digest] of setsBefore) if (digest !== '?' && this.#sets.get(name) !== digest) this.#drift.ipset.add(name);
    this.#fresh = true;
  }

  /**
   * The policies' phase of a sync: their sets (new sets exist before rules use them), the shared chains (a rule that
   * allows everything jumps to the default chain, so it must exist before the first policy chain on an empty
   * kernel), then the policy chains, which nothing jumps to yet. Resolves with the policies the kernel refused.
   */
  async applyPolicies(policies: readonly PolicyRender[], _node?: NodeRender, progress: () => void = () => undefined): Promise<PoliciesApplied> {
    this.#pending.clear();
    if (!this.#fresh) await this.refresh();
    const apply: PendingApply = { policies, failed: new Map(), nodeFailures: new Map(), chainsWritten: 0, setsWritten: 0 };
    const families = this.#options.families;
    for (const family of families) {
      const changed: { owner: string; set: SetRender }[] = [];
      for (const policy of policies) {
        for (const set of policy.families[family]?.sets ?? []) {
          if (this.#sets.get(set.spec.name) !== set.digest) changed.push({ owner: policy.id, set });
        }
      }
      if (changed.length === 0) continue;
      apply.setsWritten += await this.#writeSets(family, changed, apply.failed);
      progress();
    }
    for (const family of families) {
      const applied = this.#chains.get(family);
      const shared = renderSharedChains(family).filter((chain) => applied?.get(chain.name)?.digest !== chain.digest);
      if (shared.length === 0) continue;
      try {
        await this.#restoreChains(family, shared);
        apply.chainsWritten += shared.length;
      } catch (error) {
        apply.nodeFailures.set(family, error);
        this.#fresh = false;
      }
    }
    for (const family of families) {
      const changed: { owner: string; chain: ChainRender }[] = [];
      for (const policy of policies) {
        if (apply.failed.has(policy.id)) continue;
        for (const chain of policy.families[family]?.chains ?? []) {
          if (this.#chains.get(family)?.get(chain.name)?.digest !== chain.digest) changed.push({ owner: policy.id, chain });
        }
      }
      if (changed.length === 0) continue;
      apply.chainsWritten += await this.#writePolicyChains(family, changed, apply.failed);
      progress();
    }
    this.#pending.hand(apply);
    return { failedPolicies: apply.failed };
  }

  /**
   * The node's phase, after applyPolicies: the local pods sets declared empty, then per family one transaction with
   * the node chains and the jumps from the built-in chains, then stale chains in one of their own; the local pods
   * sets filled; stale sets destroyed once no rule refers to them.
   */
  async applyNode(node: NodeRender, progress: () => void = () => undefined): Promise<ApplyResult> {
    const apply = this.#pending.take();
    const { failed, nodeFailures } = apply;
    const families = this.#options.families;
    const localPods = families.flatMap((family) => node[family]?.localPods ?? []);
    await this.#writeNodeSets(
      localPods.filter((set) => !this.#sets.has(set.spec.name)).map((set) => ipset(set.spec, [])),
      nodeFailures,
    );
    let chainsDeleted = 0;
    const chainFailures = new Map<string, unknown>();
    for (const family of families) {
      try {
        chainsDeleted += await this.#writeNodeChains(
          family,
          node[family]?.chains ?? [],
          apply.policies,
          (written) => (apply.chainsWritten += written),
          chainFailures,
        );
      } catch (error) {
        nodeFailures.set(family, error);
        this.#fresh = false;
      }
      progress();
    }
    if (nodeFailures.size === 0) await this.#writeNodeSets(localPods, nodeFailures);

    const setFailures = new Map<string, unknown>();
    const setsDestroyed = nodeFailures.size === 0 ? await this.#destroyStaleSets(apply.policies, localPods, setFailures) : 0;
    if (failed.size > 0 || setFailures.size > 0 || chainFailures.size > 0) this.#fresh = false;
    await this.#recordRepaired();
    return {
      failedPolicies: failed,
      nodeFailures,
      setFailures,
      chainFailures,
      enforcing: nodeFailures.size === 0,
      chainsWritten: apply.chainsWritten,
      setsWritten: apply.setsWritten,
      chainsDeleted,
      setsDestroyed,
    };
  }

  async #writeSets(
    family: IpFamily,
    changed: readonly { owner: string; set: SetRender }[],
    failed: Map<string, unknown>,
  ): Promise<number> {
    try {
      await this.#restoreSets(family, changed.map((entry) => entry.set));
      return changed.length;
    } catch (error) {
      this.#options.logger.warn({ err: error, family }, 'ipset restore failed; retrying policy by policy');
    }
    // The failed restore may have stopped half-way (ipset restore is not atomic): learn what exists now.
    await this.#relistSets();
    let written = 0;
    for (const [owner, sets] of groupBy(changed, (entry) => entry.owner)) {
      try {
        await this.#restoreSets(family, sets.map((entry) => entry.set));
        written += sets.length;
      } catch (error) {
        failed.set(owner, error);
        await this.#relistSets();
      }
    }
    return written;
  }

  async #restoreSets(family: IpFamily, sets: readonly SetRender[]): Promise<void> {
    const script = new IpsetScript();
    if (this.#tempSetExists) script.destroy(TEMP_SET);
    for (const set of sets) {
      script.replaceMembers(set.spec, set.members, { tempName: TEMP_SET, createTarget: !this.#sets.has(set.spec.name) });
    }
    const started = performance.now();
    this.#tempSetExists = true;
    await this.#options.ipset.restore(script);
    this.#tempSetExists = false;
    this.#options.timings?.ipsetRestore?.(family, (performance.now() - started) / 1000);
    for (const set of sets) {
      this.#sets.set(set.spec.name, set.digest);
      this.#setFamilies.set(set.spec.name, family);
    }
  }

  async #writeNodeSets(sets: readonly SetRender[], nodeFailures: Map<IpFamily, unknown>): Promise<void> {
    for (const family of this.#options.families) {
      const changed = sets.filter((set) => set.spec.family === family && this.#sets.get(set.spec.name) !== set.digest);
      if (changed.length === 0) continue;
      try {
        await this.#restoreSets(family, changed);
      } catch (error) {
        nodeFailures.set(family, error);
        this.#fresh = false;
      }
    }
  }

  async #relistSets(): Promise<void> {
    const names = new Set(await this.#options.ipset.listNames());
    this.#tempSetExists = names.has(TEMP_SET);
    for (const name of [...this.#sets.keys()]) if (!names.has(name)) this.#sets.delete(name);
    // A set created by the half-done restore has unknown members: a digest that matches nothing rewrites it.
    for (const name of names) if (isOwnSet(name) && name !== TEMP_SET && !this.#sets.has(name)) this.#sets.set(name, '?');
  }

  async #writePolicyChains(
    family: IpFamily,
    changed: readonly { owner: string; chain: ChainRender }[],
    failed: Map<string, unknown>,
  ): Promise<number> {
    try {
      await this.#restoreChains(family, changed.map((entry) => entry.chain));
      return changed.length;
    } catch (error) {
      this.#options.logger.warn({ err: error, family }, 'policy chain restore failed; retrying policy by policy');
    }
    let written = 0;
    for (const [owner, chains] of groupBy(changed, (entry) => entry.owner)) {
      try {
        await this.#restoreChains(family, chains.map((entry) => entry.chain));
        written += chains.length;
      } catch (error) {
        failed.set(owner, error);
      }
    }
    return written;
  }

  async #writeNodeChains(
    family: IpFamily,
    nodeChains: readonly ChainRender[],
    policies: readonly PolicyRender[],
    countWritten: (written: number) => void,
    staleFailures: Map<string, unknown>,
  ): Promise<number> {
    const applied = this.#chains.get(family) as Map<string, AppliedChain>;
    const wanted = new Set(nodeChains.map((chain) => chain.name));
    for (const policy of policies) for (const chain of policy.families[family]?.chains ?? []) wanted.add(chain.name);
    const changed = nodeChains.filter((chain) => applied.get(chain.name)?.digest !== chain.digest);
    const stale = [...applied.keys()].filter((name) => !wanted.has(name));
    const jumps = this.#jumps.get(family) as Map<BuiltinChain, { position: number; spec: string }[]>;
    const jumpSpec = (builtin: BuiltinChain) => `${comment('kube-router netpol')} -j ${TOP_CHAINS[builtin]}`;
    // Our jump must be rule 1 of each built-in chain: a tool that inserts an ACCEPT ahead of it (kube-proxy's
    // KUBE-FORWARD, Docker's chains) would let traffic past every policy. Misplaced or repeated jumps are replaced,
    // deleted by their saved spec rather than by number, so that a rule another tool added since cannot be hit.
    const misplaced = BUILTIN_CHAINS.filter((builtin) => (jumps.get(builtin) ?? []).map((j) => j.position).join() !== '1');
    const lines = misplaced.flatMap((builtin) => [
      ...(jumps.get(builtin) ?? []).map((jump) => `-D ${builtin} ${jump.spec}`),
      `-I ${builtin} 1 ${jumpSpec(builtin)}`,
    ]);
    if (changed.length > 0 || lines.length > 0) {
      await this.#restoreChains(family, changed, lines);
      // The rule now at position 1 is ours; its saved spec is read again at the next refresh.
      for (const builtin of misplaced) jumps.set(builtin, [{ position: 1, spec: jumpSpec(builtin) }]);
      countWritten(changed.length);
    }
    if (stale.length === 0) return 0;
    // Deleted in a transaction of their own, once nothing of ours jumps to them: a chain the kernel will not delete
    // (someone else jumps to it) must not keep new pods from getting their chains above.
    try {
      await this.#restoreChains(family, [], [], stale);
    } catch (error) {
      staleFailures.set(`${family}/${stale.join(',')}`, error);
      return 0;
    }
    for (const name of stale) applied.delete(name);
    return stale.length;
  }

  async #restoreChains(
    family: IpFamily,
    chains: readonly ChainRender[],
    lines: readonly string[] = [],
    deleteChains: readonly string[] = [],
  ): Promise<void> {
    const input = renderIptablesRestore([{ table: 'filter', chains, lines, deleteChains }]);
    const started = performance.now();
    await this.#iptables(family).restore(input);
    this.#options.timings?.restore?.(family, (performance.now() - started) / 1000);
    const applied = this.#chains.get(family) as Map<string, AppliedChain>;
    const changedInPlace = this.#changedInPlace.get(family);
    this.#writes++;
    for (const chain of chains) {
      applied.set(chain.name, { digest: chain.digest, ruleCount: chain.rules.length });
      this.#written.set(`${family}/${chain.name}`, this.#writes);
      if (changedInPlace?.delete(chain.name)) {
        let repaired = this.#repaired.get(family);
        if (!repaired) this.#repaired.set(family, (repaired = new Set()));
        repaired.add(chain.name);
      }
    }
  }

  /**
   * Reads back the chains that were changed in place and have just been written again, and records what they hold
   * now: the same edit made again before the next periodic sync is then found by it, not adopted as the first
   * read-back after a write would. Rare (someone edits our chains), so a save of the family's filter table then. A
   * chain that cannot be read is recorded at the next read-back instead.
   */
  async #recordRepaired(): Promise<void> {
    const repaired = this.#repaired;
    this.#repaired = new Map();
    for (const [family, names] of repaired) {
      try {
        const table = await this.#iptables(family).saveParsed('filter');
        const applied = this.#chains.get(family) as Map<string, AppliedChain>;
        for (const saved of table.chains) {
          const written = names.has(saved.name) ? applied.get(saved.name) : undefined;
          if (written && written.ruleCount === saved.rules.length) applied.set(saved.name, { ...written, content: contentOf(saved.rules) });
        }
      } catch (error) {
        this.#options.logger.debug({ err: error, family }, 'could not read back the repaired chains');
      }
    }
  }

  async #destroyStaleSets(
    policies: readonly PolicyRender[],
    nodeSets: readonly SetRender[],
    failures: Map<string, unknown>,
  ): Promise<number> {
    const wanted = new Set<string>(nodeSets.map((set) => set.spec.name));
    for (const policy of policies) {
      for (const family of this.#options.families) {
        for (const set of policy.families[family]?.sets ?? []) wanted.add(set.spec.name);
      }
    }
    // Sets of a disabled family belong to it and are not ours to judge, unless its rules are gone (releaseFamily).
    const stale = [...this.#sets.keys()].filter((name) => !wanted.has(name) && this.#familyOf(name) !== undefined);
    if (stale.length === 0) return 0;
    let destroyed = 0;
    const script = new IpsetScript();
    for (const name of stale) script.destroy(name);
    try {
      await this.#options.ipset.restore(script);
      destroyed = stale.length;
      for (const name of stale) this.#sets.delete(name);
    } catch (error) {
      // A set still referenced by a rule (someone else's) cannot go; the others can.
      this.#options.logger.warn({ err: error }, 'could not destroy every stale ipset; trying one by one');
      for (const name of stale) {
        try {
          await this.#options.ipset.destroy(name);
          this.#sets.delete(name);
          destroyed++;
        } catch (single) {
          failures.set(name, single);
        }
      }
    }
    return destroyed;
  }

  /**
   * All our sets are of an enabled family unless the kernel says otherwise; refresh records the family. Undefined for
   * a disabled family's set that is not released.
   */
  #familyOf(name: string): IpFamily | undefined {
    const family = this.#setFamilies.get(name);
    if (family === undefined) return this.#options.families[0];
    return this.#options.families.includes(family) || this.#released.has(family) ? family : undefined;
  }

  #iptables(family: IpFamily): Iptables {
    const iptables = this.#options.iptables[family];
    if (!iptables) throw new Error(`no ${family} iptables configured`);
    return iptables;
  }
}

function groupBy<T>(items: readonly T[], keyOf: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    let group = groups.get(key);
    if (!group) groups.set(key, (group = []));
    group.push(item);
  }
  return groups;
}

/** A chain's rules as iptables-save prints them, hashed: equal for the same rules saved again. */
function contentOf(rules: readonly SavedRule[]): string {
  return hash('sha1', rules.map((rule) => rule.spec).join('\n'), 'base64');
}
