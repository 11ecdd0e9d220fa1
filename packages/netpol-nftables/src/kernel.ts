import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { PhaseHandOff } from '@kube-router/netpol';
import type { IpFamily, PoliciesApplied } from '@kube-router/netpol';
import { messageOf } from '@kube-router/controller';
import { CommandError, isNftRefusal } from '@kube-router/netfilter';
import type { Nft, NftRuleset } from '@kube-router/netfilter';
import type { Logger } from 'pino';
import { assemble, COMBINE_BELOW_CHARACTERS, scriptSize, setScript, tableRef } from './kernel-script.js';
import type { TablePart } from './kernel-script.js';
import { staleObjects, wantedObjects } from './kernel-stale.js';
import type { StaleObject, WantedObjects } from './kernel-stale.js';
import { contentOf, knownSetOf, readState, sameChain, sameSet } from './kernel-state.js';
import type { FamilyState, ReadBackChain } from './kernel-state.js';
import { TABLES } from './names.js';
import { chainBlock, revisionOf, setBlock } from './objects.js';
import type { ChainRender, SetRender } from './objects.js';
import type { PolicyRender } from './render-policy.js';
import type { NodeRender } from './render-node.js';

/** The node's objects, per enabled family; a family's are rendered when the apply first reads them. */
export type NodeRenders = Readonly<Partial<Record<IpFamily, NodeRender>>>;

export interface ApplyResult {
  /** Policies whose transaction the kernel refused, with why; their targets were failed closed. */
  readonly failedPolicies: ReadonlyMap<string, unknown>;
  /** The dispatch transaction (pod chains, maps, base chains) failed: nothing of it changed. */
  readonly nodeFailure?: unknown;
  /**
   * A transaction failed without nft refusing it (it timed out, the runner stopped, nft could not be run): nothing
   * tells which policy is at fault, so none is reported refused and the sync stopped writing. What did not commit
   * is written on the next sync, after the tables are read back.
   */
  readonly writeFailure?: unknown;
  /** Stale chains or sets the kernel would not delete, by `<family>/<name>`; retried next sync. */
  readonly staleFailures: ReadonlyMap<string, unknown>;
  /** The dispatch is in the tables as rendered: no write failed, no dispatch was refused. */
  readonly enforcing: boolean;
  readonly transactions: number;
  readonly chainsWritten: number;
  readonly setsWritten: number;
  readonly deleted: number;
}

export interface KernelTimings {
  /** Reading a family's table back (`nft -j list table`). */
  list?(family: IpFamily, seconds: number): void;
  /** One `nft -f` transaction, from nft's start to its exit (not the wait for the table's lock). */
  transaction?(seconds: number): void;
}

/** What the policies' phase of an apply leaves for the node's phase. */
interface PendingApply {
  readonly policies: readonly PolicyRender[];
  readonly failed: Map<string, unknown>;
  readonly counters: Counters;
  /** Set once a write failed without nft refusing it: the sync writes nothing more. */
  stopped?: unknown;
}

export interface KernelApplierOptions {
  readonly families: readonly IpFamily[];
  /**
   * One Nft for both tables, or one per family and one holding both tables' locks: each family's large transaction is
   * then written by its own nft process, the two at the same time (each table's lock orders that table's writes);
   * small changes of the two tables, and the steps that may write both (the fallback's, the deletion of stale
   * objects), go through `both`.
   */
  readonly nft: Nft | { readonly ipv4: Nft; readonly ipv6: Nft; readonly both: Nft };
  readonly logger: Logger;
  readonly timings?: KernelTimings;
}

/**
 * Keeps our tables equal to the rendered objects while writing only what changed. It knows what the kernel holds from
 * reading it back (`nft -j`, at start, on periodic syncs and after any failure) and from what it wrote since.
 * Nothing is flushed up front: each chain is replaced inside the transaction that writes it, a set changes by its
 * element changes (or is refilled) inside the transaction that needs it (see setScript), so traffic never sees a
 * chain or set half-written, and a restarted agent adopts what is in place.
 *
 * A sync is two phases (TwoPhaseKernel). applyPolicies writes each family's table in one transaction of its own (its
 * changed policies, then its dispatch as rendered with the policies refused last time failed closed: pod chains,
 * maps, base chains), the two families' at the same time. When the kernel refuses one, that family is written in
 * steps: each family of each policy is a unit of its own, a refused batch is split in halves until the refused units
 * are alone, so one bad policy costs a few extra transactions and never keeps the others out. applyNode then writes
 * the dispatch with this sync's refused policies' targets failed closed, where it differs from what went in, and
 * last deletes what nothing refers to any more.
 */
export class KernelApplier {
  readonly #options: KernelApplierOptions;
  readonly #state = new Map<IpFamily, FamilyState>();
  /**
   * Policy renders known to be in the kernel as they are, per family: an unchanged policy keeps its render object, so
   * an event's sync skips it with one lookup, without looking at its chains and sets.
   */
  #inKernel = inKernelSets();
  /** What the last stale-object sweep saw wanted; undefined after a read-back, when everything is a candidate. */
  #swept: WantedObjects | undefined;
  /** `<family>\0<set name>` of every set a transaction of the running sync wrote. */
  #writtenSets = new Set<string>();
  /**
   * Per family, what each tagged chain held at the last read-back. A rule replaced in place (`nft replace rule`) keeps
   * the chain's tag and its rule count: only its content, against what the same tag showed before, tells.
   */
  readonly #readBack = new Map<IpFamily, Map<string, ReadBackChain>>();
  /** Per family, the chains the last read-back found changed in place: once written again, they are read at once. */
  readonly #changedInPlace = new Map<IpFamily, Set<string>>();
  /** Chains changed in place and written again since, to be read back at the end of the apply (#recordRepaired). */
  #repaired: { family: IpFamily; name: string }[] = [];
  #fresh = false;
  /** What read-backs found changed or gone behind us since takeDrift last handed it over. */
  #drift = { chain: new Set<string>(), set: new Set<string>() };
  /** Between a sync's two phases: what applyPolicies did, for applyNode. */
  readonly #pending = new PhaseHandOff<PendingApply>();

  constructor(options: KernelApplierOptions) {
    this.#options = options;
  }

  invalidate(): void {
    this.#fresh = false;
  }

  /** Reads the tables back unless what is known of them is current; applyPolicies does it as well when it must. */
  async ready(): Promise<void> {
    if (!this.#fresh) await this.refresh();
  }

  /** Our chains, sets and rules known to be in the kernel. */
  counts(): { chains: number; sets: number; rules: number } {
    let chains = 0;
    let sets = 0;
    let rules = 0;
    for (const state of this.#state.values()) {
      chains += state.chains.size;
      sets += state.sets.size;
      for (const known of state.chains.values()) rules += known.ruleCount;
    }
    return { chains, sets, rules };
  }

  /** Hands over, once, the chains and sets that read-backs found changed or gone though we had written them. */
  takeDrift(): { chain: string[]; set: string[] } {
    const drift = { chain: [...this.#drift.chain], set: [...this.#drift.set] };
    this.#drift = { chain: new Set(), set: new Set() };
    return drift;
  }

  /** Drift: a chain known as written (a digest of ours) that is gone or changed, a set known that holds other elements. */
  #recordDrift(family: IpFamily, before: FamilyState, now: FamilyState): void {
    for (const [name, known] of before.chains) {
      if (known.digest === undefined) continue;
      const read = now.chains.get(name);
      if (read?.digest !== known.digest || read.ruleCount !== known.ruleCount) this.#drift.chain.add(`${family}/${name}`);
    }
    for (const [name, known] of before.sets) {
      const read = now.sets.get(name);
      if (!read || read.elements.size !== known.elements.size || [...known.elements].some((element) => !read.elements.has(element))) {
        this.#drift.set.add(`${family}/${name}`);
      }
    }
  }

  async refresh(): Promise<void> {
    // Both tables at once: with an Nft per family the two listings (each a few hundred ms on a large table) overlap.
    const read = await Promise.all(
      this.#options.families.map(async (family) => {
        const started = performance.now();
        const ruleset = await this.#list(family);
        this.#options.timings?.list?.(family, (performance.now() - started) / 1000);
        return [family, ruleset] as const;
      }),
    );
    for (const [family, ruleset] of read) {
      const readBack = new Map<string, ReadBackChain>();
      const { state, changedInPlace } = readState(ruleset, family, this.#readBack.get(family), readBack);
      const before = this.#state.get(family);
      if (before) this.#recordDrift(family, before, state);
      this.#state.set(family, state);
      this.#readBack.set(family, readBack);
      this.#changedInPlace.set(family, new Set(changedInPlace));
      if (changedInPlace.length > 0) {
        this.#options.logger.warn({ family, chains: changedInPlace }, 'rules of our chains were changed in place by someone else; writing them again');
      }
    }
    this.#inKernel = inKernelSets();
    this.#swept = undefined;
    this.#fresh = true;
  }

  /**
   * The policies' phase: each family's table in one transaction (its changed policies and `node`'s dispatch, which
   * fails closed the policies refused last time), then, for a table the kernel refused, its policies in steps.
   * Resolves with the policies the kernel refused.
   */
  async applyPolicies(policies: readonly PolicyRender[], node: NodeRenders, progress: () => void = () => undefined): Promise<PoliciesApplied> {
    this.#pending.clear();
    if (!this.#fresh) await this.refresh();
    const apply: PendingApply = { policies, failed: new Map(), counters: { transactions: 0, chainsWritten: 0, setsWritten: 0, deleted: 0 } };
    this.#writtenSets = new Set();
    this.#repaired = [];
    const slice = timeSlicer(progress);
    const refused = await this.#writeTables(apply, node, slice);
    if (refused.length > 0 && apply.stopped === undefined) {
      await this.#writeInSteps(apply, node, refused, slice);
      progress();
    }
    if (apply.stopped !== undefined) this.#fresh = false;
    this.#pending.hand(apply);
    return { failedPolicies: apply.failed };
  }

  /**
   * The node's phase: the dispatch of every family as rendered with this sync's refused policies' targets failed
   * closed, where it differs from the kernel's (a policy the kernel refused in one family fails its pods closed in
   * both; one refused last time and taken now lets its targets out), each table in a transaction of its own so that
   * one the kernel refuses keeps the other's out no longer. Then what nothing refers to any more goes.
   */
  async applyNode(node: NodeRenders, progress: () => void = () => undefined): Promise<ApplyResult> {
    const apply = this.#pending.take();
    const { failed, counters } = apply;
    if (apply.stopped !== undefined) {
      return { failedPolicies: failed, writeFailure: apply.stopped, staleFailures: new Map(), enforcing: false, ...counters };
    }
    const nodes = this.#nodes(node, this.#options.families);
    const dispatch = this.#dispatch(nodes, new Map());
    const dispatchFailures: unknown[] = [];
    for (const [index, part] of dispatch.parts.entries()) {
      try {
        await this.#transaction(assemble([part]), counters, part.family);
        const write = dispatch.writes[index]!;
        this.#wrote(write.family, write.chains, write.sets, counters);
      } catch (error) {
        dispatchFailures.push(error);
        this.#fresh = false;
        // A timeout, or an nft that could not run, would only come again for the other table: the sync stops writing.
        if (!isNftRefusal(error)) break;
      }
    }
    const nodeFailure = dispatchFailures.length > 0 ? joined(dispatchFailures, 'the dispatch of both tables failed') : undefined;
    progress();

    // What nothing refers to any more: pod chains first (they jump to policy chains), then policy chains, sets.
    const staleFailures = new Map<string, unknown>();
    if (nodeFailure === undefined) await this.#deleteStale(apply.policies, nodes, staleFailures, counters);
    if (failed.size > 0 || staleFailures.size > 0) this.#fresh = false;
    await this.#recordRepaired();
    return {
      failedPolicies: failed,
      ...(nodeFailure === undefined ? {} : { nodeFailure }),
      staleFailures,
      enforcing: nodeFailure === undefined,
      ...counters,
    };
  }

  /**
   * Usually the kernel refuses nothing: then each family's table is one transaction (one nft process reading the
   * tables once), and the families' transactions run side by side: while nft parses and commits one table, the next
   * one's script is built, and with an Nft per family the two nft processes overlap as well. Small scripts (an
   * event's element change) are the exception: every nft process first reads every chain and set of the namespace,
   * both tables', which then costs more than the script itself, so they go together in one process. Resolves with the
   * families whose transaction the kernel refused.
   */
  async #writeTables(apply: PendingApply, node: NodeRenders, slice: () => Promise<void> | undefined): Promise<IpFamily[]> {
    const { counters } = apply;
    const writeFailures: unknown[] = [];
    const send = (scripts: readonly FamilyScript[]): { scripts: readonly FamilyScript[]; outcome: Promise<boolean> } => {
      const lines = scripts.flatMap((script) => script.lines);
      const sent = scripts.map((script) => script.family);
      const outcome = this.#transaction(lines, counters, sent.length === 1 ? sent[0] : 'both').then(
        () => {
          for (const script of scripts) {
            for (const write of script.writes) this.#wrote(write.family, write.chains, write.sets, counters);
            for (const unit of script.units) this.#inKernel[unit.family].add(unit.source);
          }
          return true;
        },
        (error: unknown) => {
          if (!isNftRefusal(error)) {
            // Not the script's fault: writing it in steps would find no culprit. The sync stops writing below.
            writeFailures.push(error);
            return true;
          }
          this.#options.logger.debug({ err: error, families: sent }, 'the sync transaction was refused; writing it in steps to find what failed');
          return false;
        },
      );
      return { scripts, outcome };
    };
    const attempts: ReturnType<typeof send>[] = [];
    const held: FamilyScript[] = [];
    for (const family of this.#options.families) {
      const foundation = this.#foundation(node, [family]);
      const units = await this.#policyUnits(apply.policies, slice, [family]);
      const dispatch = this.#dispatch(this.#nodes(node, [family]), foundation.chainNames);
      const carried = await this.#unitParts(units, slice);
      const lines = assemble([...foundation.parts, ...carried.parts, ...dispatch.parts]);
      if (lines.length === 0) continue;
      const script = { family, lines, units, writes: [...foundation.writes, ...carried.writes, ...dispatch.writes] };
      if (scriptSize(lines) < COMBINE_BELOW_CHARACTERS) held.push(script);
      else attempts.push(send([script]));
      await slice();
    }
    if (held.length > 0) attempts.push(send(held));
    const refused: IpFamily[] = [];
    for (const attempt of attempts) {
      if (await attempt.outcome) continue;
      if (attempt.scripts.length === 1) {
        refused.push(attempt.scripts[0]!.family);
        continue;
      }
      // The two tables went together and were refused together: each is tried again alone, so that what the kernel
      // refuses in one table never keeps the other one out.
      const retries = attempt.scripts.map((script) => send([script]));
      for (const retry of retries) if (!(await retry.outcome)) refused.push(retry.scripts[0]!.family);
    }
    // Both tables' failures, when both failed (one timed out, the other could not run): none is dropped.
    if (writeFailures.length > 0) apply.stopped = joined(writeFailures, 'the transactions of both tables failed');
    return refused;
  }

  /**
   * The refused tables in steps. First what policy chains refer to (the default chain) and the node's sets and maps:
   * on an empty kernel a policy whose rule allows everything cannot be written before them. Each table by a
   * transaction of its own, so that what the kernel refuses in one table never keeps the other one's out. Then the
   * policies, halving refused batches until the refused units are alone.
   */
  async #writeInSteps(apply: PendingApply, node: NodeRenders, refused: readonly IpFamily[], slice: () => Promise<void> | undefined): Promise<void> {
    const foundation = this.#foundation(node, refused);
    for (const [index, part] of foundation.parts.entries()) {
      try {
        await this.#transaction(assemble([part]), apply.counters, part.family);
        const write = foundation.writes[index]!;
        this.#wrote(write.family, write.chains, write.sets, apply.counters);
      } catch (error) {
        if (!isNftRefusal(error)) {
          apply.stopped = error;
          return;
        }
        // Then nothing else of this table can be written: its policies fail with their own errors, its dispatch
        // with this.
        this.#options.logger.warn({ err: error, family: part.family }, 'could not write the shared chains');
        this.#fresh = false;
      }
    }
    try {
      await this.#applyUnits(await this.#policyUnits(apply.policies, slice, refused), apply.failed, apply.counters);
    } catch (error) {
      if (!(error instanceof NotRefused)) throw error;
      apply.stopped = error.cause;
    }
  }

  /** The shared chains that changed and the node's sets and maps not yet in the kernel (declared empty). */
  #foundation(node: NodeRenders, families: readonly IpFamily[]): { parts: TablePart[]; writes: Write[]; chainNames: Map<IpFamily, Set<string>> } {
    const parts: TablePart[] = [];
    const writes: Write[] = [];
    const chainNames = new Map<IpFamily, Set<string>>();
    for (const family of families) {
      const state = this.#family(family);
      const shared = renderedFamily(node, family);
      const chains = shared.sharedChains.filter((c) => !sameChain(state.chains.get(c.name), c));
      const declared = shared.sets.filter((set) => !state.sets.has(set.name)).map((set) => ({ ...set, elements: [] }));
      chainNames.set(family, new Set(chains.map((c) => c.name)));
      if (chains.length + declared.length === 0) continue;
      parts.push(this.#unitScript(family, chains, declared));
      writes.push({ family, chains, sets: declared });
    }
    return { parts, writes, chainNames };
  }

  /** Each (policy, family) whose chains or sets differ from the kernel's, with the table part that makes them equal. */
  async #policyUnits(policies: readonly PolicyRender[], slice: () => Promise<void> | undefined, families: readonly IpFamily[]): Promise<Unit[]> {
    const units: Unit[] = [];
    // A set that several policies share has the same elements in each of their renders: compared with the kernel's
    // once per family (#unitParts then writes it once).
    const compared = new Map(families.map((family) => [family, new Map<string, { first: SetRender; differing: boolean }>()] as const));
    for (const policy of policies) {
      for (const family of families) {
        const inKernel = this.#inKernel[family];
        if (inKernel.has(policy)) continue;
        const render = policy.families[family];
        if (!render) continue;
        const state = this.#family(family);
        const comparedHere = compared.get(family) as Map<string, { first: SetRender; differing: boolean }>;
        const chains = render.chains.filter((candidate) => !sameChain(state.chains.get(candidate.name), candidate));
        const sets = render.sets.filter((candidate) => {
          let seen = comparedHere.get(candidate.name);
          if (seen === undefined) comparedHere.set(candidate.name, (seen = { first: candidate, differing: !sameSet(state.sets.get(candidate.name), candidate, family) }));
          else this.#checkShared(seen.first, candidate, policy.id);
          return seen.differing;
        });
        if (chains.length === 0 && sets.length === 0) {
          inKernel.add(policy);
          continue;
        }
        units.push({ policy: policy.id, source: policy, family, chains, sets });
      }
      const due = slice();
      if (due) await due;
    }
    return units;
  }

  /**
   * Every policy that names a shared set renders it from the same compile of the same pods, so it has the same
   * elements; only the first render is written. Were that ever not so, this says which policy disagreed.
   */
  #checkShared(first: SetRender | undefined, other: SetRender, policy: string): void {
    if (!first || first.elements === other.elements) return;
    if (first.elements.length === other.elements.length && first.elements.every((element, index) => element === other.elements[index])) return;
    this.#options.logger.warn({ set: first.name, policy }, 'a shared set was rendered with other elements for another policy; the first render is written');
  }

  #nodes(node: NodeRenders, families: readonly IpFamily[]): Map<IpFamily, NodeRender> {
    return new Map(families.map((family) => [family, renderedFamily(node, family)] as const));
  }

  /** The node's changed chains and elements; `written` are shared chains the same transaction writes already. */
  #dispatch(nodes: ReadonlyMap<IpFamily, NodeRender>, written: ReadonlyMap<IpFamily, ReadonlySet<string>>): { parts: TablePart[]; writes: Write[] } {
    const parts: TablePart[] = [];
    const writes: Write[] = [];
    for (const [family, node] of nodes) {
      const state = this.#family(family);
      const skip = written.get(family) ?? new Set<string>();
      const chains = [...node.sharedChains, ...node.podChains].filter((c) => !skip.has(c.name) && !sameChain(state.chains.get(c.name), c));
      const sets = node.sets.filter((candidate) => !sameSet(state.sets.get(candidate.name), candidate, family));
      const base = node.baseChains.filter((c) => !sameChain(state.chains.get(c.name), c));
      if (chains.length + sets.length + base.length === 0) continue;
      // The base chains, which use the maps, after the chains the maps' elements jump to.
      parts.push(this.#unitScript(family, [...chains, ...base], sets));
      writes.push({ family, chains: [...chains, ...base], sets });
    }
    return { parts, writes };
  }

  async #applyUnits(units: readonly Unit[], failed: Map<string, unknown>, counters: Counters): Promise<void> {
    if (units.length === 0) return;
    try {
      const carried = await this.#unitParts(units);
      await this.#transaction(assemble(carried.parts), counters);
      for (const write of carried.writes) this.#wrote(write.family, write.chains, write.sets, counters);
      for (const unit of units) this.#inKernel[unit.family].add(unit.source);
    } catch (error) {
      if (!isNftRefusal(error)) throw new NotRefused(error);
      if (units.length === 1) {
        const unit = units[0] as Unit;
        this.#options.logger.warn({ err: error, policy: unit.policy, family: unit.family }, 'the kernel refused a policy');
        failed.set(unit.policy, error);
        return;
      }
      // Nothing of a refused transaction was committed: halve it until the refused units are alone.
      const middle = Math.ceil(units.length / 2);
      await this.#applyUnits(units.slice(0, middle), failed, counters);
      await this.#applyUnits(units.slice(middle), failed, counters);
    }
  }

  /**
   * The units' table parts against what the kernel holds now, and what each writes. A set that several policies
   * share (it is named by its selectors or its ipBlocks, not by a rule) goes into the transaction once, with the
   * first unit that needs it; in a step of the fallback that may be another unit than in the first transaction, and
   * a set an earlier step made as wanted goes in with none: its element changes were worked out before, and deleting
   * an element twice would be refused.
   */
  async #unitParts(units: readonly Unit[], slice?: () => Promise<void> | undefined): Promise<{ parts: TablePart[]; writes: Write[] }> {
    const claimed = new Set<string>();
    const parts: TablePart[] = [];
    const writes: Write[] = [];
    for (const unit of units) {
      const state = this.#family(unit.family);
      const sets = unit.sets.filter((set) => {
        const key = `${unit.family}\0${set.name}`;
        if (claimed.has(key)) return false;
        claimed.add(key);
        return !this.#writtenSets.has(key) || !sameSet(state.sets.get(set.name), set, unit.family);
      });
      parts.push(this.#unitScript(unit.family, unit.chains, sets));
      writes.push({ family: unit.family, chains: unit.chains, sets });
      const due = slice?.();
      if (due) await due;
    }
    return { parts, writes };
  }

  /**
   * What makes these chains and sets as rendered: new sets and every chain's rules in the table block, flushes of
   * chains the kernel holds before it, element changes of sets it holds after it.
   */
  #unitScript(family: IpFamily, chains: readonly ChainRender[], sets: readonly SetRender[]): TablePart {
    const table = tableRef(family);
    const state = this.#family(family);
    const before: string[] = state.tableExists ? [] : [`add table ${table}`];
    const block: string[] = [];
    const after: string[] = [];
    const chainsRead = sets.length === 0 ? 0 : this.#knownChains();
    for (const set of sets) {
      const known = state.sets.get(set.name);
      if (known) after.push(...setScript(table, set, known, chainsRead));
      else block.push(...setBlock(set));
    }
    for (const written of chains) {
      if (state.chains.has(written.name)) before.push(`flush chain ${table} ${written.name}`);
      block.push(...chainBlock(written));
    }
    return { family, before, block, after };
  }

  #wrote(family: IpFamily, chains: readonly ChainRender[], sets: readonly SetRender[], counters: Counters): void {
    const state = this.#family(family);
    state.tableExists = true;
    // What a chain held when read back no longer stands for it once it is written: the next read-back records what
    // was written (else a chain adopted as someone left it, then written again, would differ from it ever after).
    const readBack = this.#readBack.get(family);
    const changedInPlace = this.#changedInPlace.get(family);
    for (const written of chains) {
      state.chains.set(written.name, { digest: written.digest, ruleCount: written.rules.length });
      readBack?.delete(written.name);
      if (changedInPlace?.delete(written.name)) this.#repaired.push({ family, name: written.name });
    }
    for (const set of sets) {
      state.sets.set(set.name, knownSetOf(set, family));
      this.#writtenSets.add(`${family}\0${set.name}`);
    }
    counters.chainsWritten += chains.length;
    counters.setsWritten += sets.length;
  }


  async #deleteStale(
    policies: readonly PolicyRender[],
    nodes: ReadonlyMap<IpFamily, NodeRender>,
    failures: Map<string, unknown>,
    counters: Counters,
  ): Promise<void> {
    const { families } = this.#options;
    const wanted = wantedObjects(policies, nodes, families);
    const doomed = staleObjects(wanted, policies, families, (family) => this.#family(family), this.#swept);
    this.#swept = wanted;
    if (doomed.length === 0) return;
    const line = (item: StaleObject) => `delete ${item.kind} ${tableRef(item.family)} ${item.name}`;
    const forget = (item: StaleObject) => {
      const state = this.#family(item.family);
      if (item.kind === 'chain') state.chains.delete(item.name);
      else state.sets.delete(item.name);
      counters.deleted++;
    };
    try {
      await this.#transaction(doomed.map(line), counters);
      doomed.forEach(forget);
    } catch (error) {
      // One at a time only finds the object nft refuses to delete; a timeout would only come again for each of them.
      if (!isNftRefusal(error)) {
        for (const item of doomed) failures.set(`${item.family}/${item.name}`, error);
        return;
      }
      this.#options.logger.warn({ err: error }, 'could not delete every stale chain and set at once; deleting one by one');
      for (const item of doomed) {
        try {
          await this.#transaction([line(item)], counters);
          forget(item);
        } catch (single) {
          failures.set(`${item.family}/${item.name}`, single);
        }
      }
    }
  }

  /** One `nft -f`; a family's own Nft when it is given, so that the families' transactions can run at once. */
  async #transaction(lines: readonly string[], counters: Counters, family?: IpFamily | 'both'): Promise<void> {
    counters.transactions++;
    const { durationMs } = await this.#nft(family).apply(`${lines.join('\n')}\n`);
    // nft's own time: a transaction queued behind another of its table does not count the wait.
    this.#options.timings?.transaction?.(durationMs / 1000);
  }

  /**
   * Reads back each chain that was changed in place and has just been written again, and records what it holds now:
   * an edit that someone makes again before the next periodic sync is then found by it, not adopted as a new tag's
   * would be. Rare (someone edits our chains), so one listing per chain. A chain that cannot be read is recorded at
   * the next read-back instead.
   */
  async #recordRepaired(): Promise<void> {
    const repaired = this.#repaired;
    this.#repaired = [];
    for (const { family, name } of repaired) {
      const { family: nftFamily, name: table } = TABLES[family];
      try {
        const { rules } = await this.#nft(family).list(['chain', nftFamily, table, name]);
        const digest = revisionOf(rules[0]?.comment);
        if (digest !== undefined) this.#readBack.get(family)?.set(name, { digest, content: contentOf(rules) });
      } catch (error) {
        this.#options.logger.debug({ err: error, family, chain: name }, 'could not read back a repaired chain');
      }
    }
  }

  async #list(family: IpFamily): Promise<NftRuleset> {
    const { family: nftFamily, name } = TABLES[family];
    try {
      return await this.#nft(family).list(['table', nftFamily, name]);
    } catch (error) {
      if (error instanceof CommandError && /No such file or directory/.test(error.stderr)) {
        return { tables: [], chains: [], rules: [], sets: [], maps: [], counters: [] };
      }
      throw error;
    }
  }

  /** The Nft for one table's transaction; for both tables at once (or a family not said) one that may write both. */
  #nft(family: IpFamily | 'both' | undefined): Nft {
    const { nft } = this.#options;
    // By shape, not class: a second copy of @kube-router/netfilter in a consumer's tree makes other Nft classes.
    if ('apply' in nft) return nft;
    if (family === 'both' || family === undefined) return nft.both;
    return nft[family];
  }

  /** Our chains in both tables: about what nft reads before a `delete element` (other tools' chains come on top). */
  #knownChains(): number {
    let chains = 0;
    for (const state of this.#state.values()) chains += state.chains.size;
    return chains;
  }

  #family(family: IpFamily): FamilyState {
    let state = this.#state.get(family);
    if (!state) this.#state.set(family, (state = { tableExists: false, chains: new Map(), sets: new Map() }));
    return state;
  }
}

function inKernelSets(): Record<IpFamily, WeakSet<PolicyRender>> {
  return { ipv4: new WeakSet(), ipv6: new WeakSet() };
}

/** One failure as it is; several as one error whose message carries each of theirs (a joined sync error shows messages). */
function joined(errors: readonly unknown[], what: string): unknown {
  if (errors.length === 1) return errors[0];
  return new AggregateError(errors, `${what}: ${errors.map(messageOf).join('; ')}`);
}

/** Carries a failure that is not a refusal out of the fallback's halving, which only halves refusals. */
class NotRefused extends Error {
  constructor(cause: unknown) {
    super('a transaction failed without nft refusing it', { cause });
  }
}

/** A family's node render, which the dataplane renders for every enabled family. */
function renderedFamily(node: NodeRenders, family: IpFamily): NodeRender {
  const rendered = node[family];
  if (!rendered) throw new Error(`no ${family} node render`);
  return rendered;
}

/** One family's transaction of a sync: its lines, and what the applier knows the kernel holds once it committed. */
interface FamilyScript {
  readonly family: IpFamily;
  readonly lines: readonly string[];
  readonly units: readonly Unit[];
  readonly writes: readonly Write[];
}

interface Unit {
  readonly policy: string;
  /** The policy's render: once the unit is written, known to be in the kernel for this family. */
  readonly source: PolicyRender;
  readonly family: IpFamily;
  readonly chains: readonly ChainRender[];
  /** The policy's sets that differed from the kernel's when the unit was made (shared ones too; see #unitParts). */
  readonly sets: readonly SetRender[];
}

interface Write {
  readonly family: IpFamily;
  readonly chains: readonly ChainRender[];
  readonly sets: readonly SetRender[];
}

/** Yields to the event loop once `SLICE_MS` of synchronous work has passed, beating the sync's progress. */
function timeSlicer(progress: () => void): () => Promise<void> | undefined {
  let sliceStart = performance.now();
  // Undefined until a slice is due, so that the caller awaits only then: an await per policy on every sync was a
  // cost that grew with the number of policies.
  return () => {
    if (performance.now() - sliceStart < SLICE_MS) return undefined;
    return yieldToEventLoop().then(() => {
      progress();
      sliceStart = performance.now();
    });
  };
}

const SLICE_MS = 10;

interface Counters {
  transactions: number;
  chainsWritten: number;
  setsWritten: number;
  deleted: number;
}
