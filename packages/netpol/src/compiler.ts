import { isDeepStrictEqual } from 'node:util';
import { ClusterIndex, readableEntries } from './cluster-index.js';
import type { ClusterChanges, ObjectChanges } from './cluster-index.js';
import { defineFingerprint } from './fingerprint.js';
import type { CompiledPolicy, LocalPod, PolicyModel, PolicyProblem } from './model.js';
import { parsePolicy } from './parse-policy.js';
import type { BeyondSelectorsRule, ParsedPolicy, SelectorPeer } from './parse-policy.js';
import type { PodView } from './pods.js';
import { ipsInside, resolvePolicy } from './resolve-policy.js';
import type { PeerCache } from './resolve-policy.js';
import { compareText } from './sort.js';
import { runInSlices, runToEnd } from './steps.js';
import type { Steps } from './steps.js';
import type { Labels, NamespaceLike, NetworkPolicyLike, PodLike } from './types.js';

export interface CompileInput {
  /** Every pod of the cluster (peers can be anywhere); the local ones are those with spec.nodeName = nodeName. */
  readonly pods: readonly PodLike[];
  readonly namespaces: readonly NamespaceLike[];
  readonly policies: readonly NetworkPolicyLike[];
}

/**
 * What changed since the last compile, object by object (an informer's add, update and delete events, each key once
 * with its latest state). A compile from these reads only them; the result is the one a compile of the full lists
 * after the same changes gives.
 */
export interface CompileChanges {
  readonly pods: ObjectChanges<PodLike>;
  readonly namespaces: ObjectChanges<NamespaceLike>;
  readonly policies: ObjectChanges<NetworkPolicyLike>;
}

export interface CompilerOptions {
  /** This node's name, as in pod.spec.nodeName. */
  readonly nodeName: string;
}

/** What the last compile did, for logs, metrics and the benchmark. */
export interface CompileStats {
  readonly podsChanged: number;
  readonly namespacesChanged: number;
  readonly policiesChanged: number;
  /** Policies resolved again because something they depend on changed. */
  readonly policiesRecompiled: number;
  readonly policiesTotal: number;
  readonly durationMs: number;
}

interface PolicyUpdate {
  readonly dirty: Set<string>;
  readonly changedPolicies: number;
  readonly policySetChanged: boolean;
  /** A policy came or went (not only changed). */
  readonly keysChanged: boolean;
}

interface PolicyEntry {
  readonly source: NetworkPolicyLike;
  readonly parsed: ParsedPolicy;
  compiled: CompiledPolicy | undefined;
  /** What the entry this one replaced had compiled to, until this one is resolved. */
  replaced: CompiledPolicy | undefined;
  resolveProblems: readonly PolicyProblem[];
}

/** Work between two turns of the event loop in compileAsync. */
const DEFAULT_SLICE_MS = 10;

/** Beyond this many pod changes, checking each policy against each change costs more than recompiling everything. */
const FULL_RECOMPILE_THRESHOLD = 256;

/**
 * Compiles NetworkPolicies into a PolicyModel, incrementally. Each compile takes the full current lists (level-
 * triggered), finds what changed since the last one, and resolves again only the policies that a changed pod,
 * namespace or policy can affect; unchanged policies keep their CompiledPolicy objects (and fingerprints). When
 * nothing changed, the previous model object itself is returned.
 */
export class PolicyCompiler {
  readonly nodeName: string;
  readonly #cluster: ClusterIndex;
  #policies = new Map<string, PolicyEntry>();
  /**
   * Which policies a pod change can concern without checking each policy: those of the pod's namespace (as targets or
   * podSelector-only peers), and the global ones (a namespaceSelector peer, or egress named ports beyond selectors).
   */
  readonly #policiesByNamespace = new Map<string, Set<string>>();
  readonly #globalPolicies = new Set<string>();
  #model: PolicyModel | undefined;
  /** The keys of the policies in #model, in its order: reused while no policy comes, goes or changes its targets. */
  #order: string[] = [];
  /** compileAsync calls run one after the other. */
  #queue: Promise<unknown> = Promise.resolve();
  #running = false;
  #stats: CompileStats = {
    podsChanged: 0,
    namespacesChanged: 0,
    policiesChanged: 0,
    policiesRecompiled: 0,
    policiesTotal: 0,
    durationMs: 0,
  };

  constructor(options: CompilerOptions) {
    this.nodeName = options.nodeName;
    this.#cluster = new ClusterIndex(options.nodeName);
  }

  get lastStats(): CompileStats {
    return this.#stats;
  }

  /** Whether a compile has run: compileChanges needs the state a compile of the full lists left. */
  get hasCompiled(): boolean {
    return this.#model !== undefined;
  }

  /**
   * Never throws: input that cannot be read (an entry that is not an object, a throwing getter, a list that is not a
   * list) is reported or left out, and everything else is compiled. Must not be called while compileAsync runs.
   */
  compile(input: CompileInput): PolicyModel {
    if (this.#running) throw new Error('PolicyCompiler.compile called while compileAsync is running');
    return runToEnd(this.#compileSteps(input));
  }

  /**
   * compile(), giving the event loop a turn after about every `sliceMs` (default 10) of work, so that health probes and
   * watches are answered during the full compile of a large cluster (at start, or after a relist). Calls are queued:
   * each one compiles against the state the previous one left.
   */
  compileAsync(input: CompileInput, options: { readonly sliceMs?: number } = {}): Promise<PolicyModel> {
    return this.#enqueue(() => this.#compileSteps(input), options.sliceMs ?? DEFAULT_SLICE_MS);
  }

  /**
   * compile() from the objects that changed since the last compile instead of the full lists: an event then costs what
   * it changes, not what the cluster holds. Needs a compile of the full lists first (hasCompiled); the changes must be
   * every change since the previous compile, or the model drifts until the next compile of the full lists.
   */
  compileChanges(changes: CompileChanges): PolicyModel {
    if (this.#running) throw new Error('PolicyCompiler.compileChanges called while compileAsync is running');
    return runToEnd(this.#changeSteps(changes));
  }

  /** compileChanges(), in slices and queued as compileAsync. */
  compileChangesAsync(changes: CompileChanges, options: { readonly sliceMs?: number } = {}): Promise<PolicyModel> {
    return this.#enqueue(() => this.#changeSteps(changes), options.sliceMs ?? DEFAULT_SLICE_MS);
  }

  #enqueue(steps: () => Steps<PolicyModel>, sliceMs: number): Promise<PolicyModel> {
    const run = this.#queue.then(async () => {
      this.#running = true;
      try {
        return await runInSlices(steps(), sliceMs);
      } finally {
        this.#running = false;
      }
    });
    this.#queue = run.catch(() => undefined);
    return run;
  }

  *#compileSteps(input: CompileInput): Steps<PolicyModel> {
    const started = performance.now();
    const lists = readInput(input);
    const changes = yield* this.#cluster.updateSteps(lists.pods, lists.namespaces);
    const update = yield* this.#updatePolicies(lists.policies);
    return yield* this.#resolveSteps(started, changes, update);
  }

  *#changeSteps(input: CompileChanges): Steps<PolicyModel> {
    if (!this.#model) throw new Error('PolicyCompiler.compileChanges needs a compile of the full lists first');
    const started = performance.now();
    const read = <T>(changes: ObjectChanges<T>): ObjectChanges<T> => {
      try {
        return { upserted: readableEntries(changes.upserted), deleted: readableEntries(changes.deleted) };
      } catch {
        return { upserted: [], deleted: [] };
      }
    };
    const changes = yield* this.#cluster.applySteps(read(input.pods), read(input.namespaces));
    const update = yield* this.#applyPolicies(read(input.policies));
    return yield* this.#resolveSteps(started, changes, update);
  }

  *#resolveSteps(started: number, changes: ClusterChanges, update: PolicyUpdate): Steps<PolicyModel> {
    const { dirty, changedPolicies, policySetChanged, keysChanged } = update;
    this.#markAffected(changes, dirty);
    const modelPodsChanged = changes.pods.some(
      ({ before, after }) =>
        before?.local || after?.local || (before?.problems.length ?? 0) > 0 || (after?.problems.length ?? 0) > 0,
    );

    // An event that changes a policy's peers (a remote pod relabelled) leaves every local pod's policies as they were:
    // the model then keeps its pods and its order of policies, so that such an event costs the same however many
    // policies there are.
    let podsKept = this.#model !== undefined && !keysChanged && !modelPodsChanged;
    const cache: PeerCache = new Map();
    for (const id of dirty) {
      const entry = this.#policies.get(id);
      if (!entry) continue;
      const before = entry.compiled ?? entry.replaced;
      const resolved = resolvePolicy(entry.parsed, this.#cluster, cache);
      entry.compiled = resolved.compiled;
      entry.replaced = undefined;
      entry.resolveProblems = resolved.problems;
      if (podsKept && !sameForPods(before, entry.compiled)) podsKept = false;
      yield;
    }

    if (!this.#model || dirty.size > 0 || policySetChanged || modelPodsChanged) this.#model = this.#buildModel(podsKept ? this.#model : undefined);
    this.#stats = {
      podsChanged: changes.pods.length,
      namespacesChanged: changes.namespaces.length,
      policiesChanged: changedPolicies,
      policiesRecompiled: dirty.size,
      policiesTotal: this.#policies.size,
      durationMs: performance.now() - started,
    };
    return this.#model;
  }

  *#updatePolicies(policies: readonly NetworkPolicyLike[]): Steps<PolicyUpdate> {
    const dirty = new Set<string>();
    const next = new Map<string, PolicyEntry>();
    let changedPolicies = 0;
    let added = 0;
    for (const [index, policy] of policies.entries()) {
      const id = policyKey(policy, index);
      const previous = next.get(id) ?? this.#policies.get(id);
      if (previous && previous.source === policy) {
        next.set(id, previous);
        continue;
      }
      if (previous && samePolicyContent(previous.source, policy)) {
        next.set(id, { ...previous, source: policy });
        continue;
      }
      const parsed = parsePolicy(policy);
      // What the last model had under this key (not an earlier copy of the key in this same list, not resolved yet).
      next.set(id, { source: policy, parsed, compiled: undefined, replaced: this.#policies.get(id)?.compiled, resolveProblems: [] });
      if (!this.#policies.has(id)) added++;
      dirty.add(id);
      changedPolicies++;
      yield;
    }
    let removed = 0;
    for (const id of this.#policies.keys()) if (!next.has(id)) removed++;
    this.#policies = next;
    if (changedPolicies + removed > 0) {
      this.#policiesByNamespace.clear();
      this.#globalPolicies.clear();
      for (const [id, entry] of next) this.#indexPolicy(id, entry.parsed);
    }
    return {
      dirty,
      changedPolicies: changedPolicies + removed,
      policySetChanged: changedPolicies + removed > 0,
      keysChanged: added + removed > 0,
    };
  }

  /** #updatePolicies for the policies that changed: what comes of it is what the full list would have given. */
  *#applyPolicies(changes: ObjectChanges<NetworkPolicyLike>): Steps<PolicyUpdate> {
    const dirty = new Set<string>();
    let changedPolicies = 0;
    let added = 0;
    let removed = 0;
    for (const policy of changes.deleted) {
      const id = policyKey(policy, -1);
      const previous = this.#policies.get(id);
      if (!previous) continue;
      this.#policies.delete(id);
      this.#unindexPolicy(id, previous.parsed);
      dirty.delete(id);
      removed++;
    }
    for (const policy of changes.upserted) {
      // An informer keys its objects by namespace and name, so every policy it hands out has both.
      const id = policyKey(policy, -1);
      if (id.startsWith('#')) continue;
      const previous = this.#policies.get(id);
      if (previous && previous.source === policy) continue;
      if (previous && samePolicyContent(previous.source, policy)) {
        this.#policies.set(id, { ...previous, source: policy });
        continue;
      }
      const parsed = parsePolicy(policy);
      if (previous) this.#unindexPolicy(id, previous.parsed);
      else added++;
      this.#policies.set(id, { source: policy, parsed, compiled: undefined, replaced: previous?.compiled, resolveProblems: [] });
      this.#indexPolicy(id, parsed);
      dirty.add(id);
      changedPolicies++;
      yield;
    }
    return {
      dirty,
      changedPolicies: changedPolicies + removed,
      policySetChanged: changedPolicies + removed > 0,
      keysChanged: added + removed > 0,
    };
  }

  #indexPolicy(id: string, parsed: ParsedPolicy): void {
    if (isGlobal(parsed)) this.#globalPolicies.add(id);
    let ids = this.#policiesByNamespace.get(parsed.namespace);
    if (!ids) {
      ids = new Set();
      this.#policiesByNamespace.set(parsed.namespace, ids);
    }
    ids.add(id);
  }

  #unindexPolicy(id: string, parsed: ParsedPolicy): void {
    this.#globalPolicies.delete(id);
    const ids = this.#policiesByNamespace.get(parsed.namespace);
    ids?.delete(id);
    if (ids?.size === 0) this.#policiesByNamespace.delete(parsed.namespace);
  }

  /**
   * Marks the policies whose result a pod or namespace change can alter. Only the policies a change can concern are
   * checked (those of its pods' namespaces and the global ones), so that an event in one namespace does not cost a
   * look at every policy of the cluster.
   */
  #markAffected(changes: ClusterChanges, dirty: Set<string>): void {
    if (changes.pods.length === 0 && changes.namespaces.length === 0) return;
    if (changes.pods.length > FULL_RECOMPILE_THRESHOLD) {
      for (const id of this.#policies.keys()) dirty.add(id);
      return;
    }
    // Many policies share a peer (the same selectors): each is matched against a changed pod once.
    const peerMatches = new Map<PodView, Map<string, boolean>>();
    const check = (id: string) => {
      if (dirty.has(id)) return;
      const entry = this.#policies.get(id);
      if (entry && (this.#affectedByPods(entry.parsed, changes, peerMatches) || affectedByNamespaces(entry.parsed, changes))) {
        dirty.add(id);
      }
    };
    for (const id of this.#globalPolicies) check(id);
    const namespaces = new Set<string>();
    for (const { before, after } of changes.pods) {
      if (before) namespaces.add(before.namespace);
      if (after) namespaces.add(after.namespace);
    }
    for (const namespace of namespaces) for (const id of this.#policiesByNamespace.get(namespace) ?? []) check(id);
  }

  #affectedByPods(parsed: ParsedPolicy, changes: ClusterChanges, peerMatches: Map<PodView, Map<string, boolean>>): boolean {
    for (const change of changes.pods) {
      if (parsed.egressNamedPortsBeyond.some((rule) => namedPortReachChanged(rule, change.before, change.after))) {
        return true;
      }
      for (const pod of [change.before, change.after]) {
        if (!pod) continue;
        if (isTarget(parsed, pod) || this.#isPeer(parsed, pod, peerMatches)) return true;
      }
    }
    return false;
  }

  #isPeer(parsed: ParsedPolicy, pod: PodView, peerMatches: Map<PodView, Map<string, boolean>>): boolean {
    if (parsed.selectorPeers.length === 0) return false;
    let matches = peerMatches.get(pod);
    if (!matches) peerMatches.set(pod, (matches = new Map()));
    let namespaceLabels: Labels | undefined;
    for (const peer of parsed.selectorPeers) {
      // Equal keys select the same pods (a podSelector-only peer's key names its namespace).
      const key = peer.key;
      let selects = matches.get(key);
      if (selects === undefined) {
        namespaceLabels ??= this.#cluster.namespaceLabels(pod.namespace);
        selects = peerSelects(peer, pod, namespaceLabels);
        matches.set(key, selects);
      }
      if (selects) return true;
    }
    return false;
  }

  /**
   * `kept` is the previous model when every local pod's policies and their flags are as they were in it: its pods
   * and its order of policies are reused instead of being worked out from every policy again.
   */
  #buildModel(kept: PolicyModel | undefined): PolicyModel {
    const problems: PolicyProblem[] = [];
    for (const entry of this.#policies.values()) problems.push(...entry.parsed.problems, ...entry.resolveProblems);
    let policies: CompiledPolicy[] | undefined;
    if (kept) {
      const inOrder = this.#order.map((key) => this.#policies.get(key)?.compiled);
      // Only ever whole: should a policy of the order have none, everything is worked out again.
      if (inOrder.every((compiled) => compiled !== undefined)) policies = inOrder;
      else kept = undefined;
    }
    if (!policies) {
      const keyed: { key: string; compiled: CompiledPolicy }[] = [];
      for (const [key, entry] of this.#policies) if (entry.compiled) keyed.push({ key, compiled: entry.compiled });
      keyed.sort((a, b) => compareText(a.compiled.id, b.compiled.id));
      this.#order = keyed.map((item) => item.key);
      policies = keyed.map((item) => item.compiled);
    }
    problems.sort(
      (a, b) => compareText(a.policy, b.policy) || compareText(a.path, b.path) || compareText(a.message, b.message),
    );

    const pods = kept?.pods ?? this.#localPods(policies);
    const podProblems = this.#cluster.podProblems();
    return defineFingerprint({ nodeName: this.nodeName, policies, pods, problems, podProblems }, () => [
      policies.map((policy) => `${policy.id} ${policy.fingerprint}`),
      pods,
      problems,
      podProblems,
    ]);
  }

  /** Each local pod with the policies that isolate it, per direction. */
  #localPods(policies: readonly CompiledPolicy[]): LocalPod[] {
    const applying = new Map<string, { ingress: CompiledPolicy[]; egress: CompiledPolicy[] }>();
    for (const policy of policies) {
      for (const target of policy.targets) {
        let entry = applying.get(target.pod);
        if (!entry) {
          entry = { ingress: [], egress: [] };
          applying.set(target.pod, entry);
        }
        if (policy.ingress.isolates) entry.ingress.push(policy);
        if (policy.egress.isolates) entry.egress.push(policy);
      }
    }
    return [...this.#cluster.localPods()]
      .sort((a, b) => compareText(a.id, b.id))
      .map((pod) => {
        const entry = applying.get(pod.id) ?? { ingress: [], egress: [] };
        const state = (list: CompiledPolicy[], direction: 'ingress' | 'egress') => ({
          isolated: list.length > 0,
          failClosed: list.some((policy) => policy[direction].failClosed),
          policies: list.map((policy) => policy.id),
        });
        return {
          id: pod.id,
          namespace: pod.namespace,
          name: pod.name,
          ips: pod.ips,
          ingress: state(entry.ingress, 'ingress'),
          egress: state(entry.egress, 'egress'),
        };
      });
  }
}

/**
 * Whether the model's local pods read the same from the two compiles of one policy: what #localPods takes from it.
 * Its peers and ports may differ; the pods only name it.
 */
function sameForPods(before: CompiledPolicy | undefined, after: CompiledPolicy | undefined): boolean {
  if (before === undefined || after === undefined) return before === after;
  return (
    before.id === after.id &&
    before.ingress.isolates === after.ingress.isolates &&
    before.egress.isolates === after.egress.isolates &&
    before.ingress.failClosed === after.ingress.failClosed &&
    before.egress.failClosed === after.egress.failClosed &&
    before.targets.length === after.targets.length &&
    before.targets.every((target, index) => target.pod === after.targets[index]?.pod)
  );
}

/** Compiles once, without keeping state between calls. */
export function compileNetworkPolicies(input: CompileInput & CompilerOptions): PolicyModel {
  return new PolicyCompiler({ nodeName: input.nodeName }).compile(input);
}

/** The three lists, each reduced to the entries that can be read. */
function readInput(input: CompileInput): CompileInput {
  const list = <T>(read: () => readonly T[]): T[] => {
    try {
      return readableEntries(read());
    } catch {
      return [];
    }
  };
  return {
    pods: list(() => input.pods),
    namespaces: list(() => input.namespaces),
    policies: list(() => input.policies),
  };
}

/**
 * The key a policy is tracked by: its namespace and name when both are strings (JSON keeps `a/b` + `c` apart from
 * `a` + `b/c`). A malformed policy gets a key of its own position instead of a coerced one, so that a name of ['web']
 * cannot replace the valid policy `web`; it is reported and fails closed on its own.
 */
function policyKey(policy: NetworkPolicyLike, index: number): string {
  try {
    const namespace: unknown = policy?.metadata?.namespace;
    const name: unknown = policy?.metadata?.name;
    if (typeof namespace === 'string' && typeof name === 'string' && namespace !== '' && name !== '') {
      return JSON.stringify([namespace, name]);
    }
  } catch {
    // Unreadable: tracked by position like any other malformed policy.
  }
  return `#${index}`;
}

/**
 * Whether a pod change alters what an egress named port beyond selectors resolves to: the port numbers the pod gives
 * the rule's names, and its addresses the rule reaches (all of them for any peer, those inside the blocks otherwise).
 * A relabelled pod, or one that defines none of the names, changes nothing there.
 */
function namedPortReachChanged(rule: BeyondSelectorsRule, before: PodView | undefined, after: PodView | undefined) {
  return namedPortReach(rule, before) !== namedPortReach(rule, after);
}

function namedPortReach(rule: BeyondSelectorsRule, pod: PodView | undefined): string {
  if (!pod) return '';
  let reach = '';
  for (const key of rule.keys) {
    const port = pod.namedPorts.get(key);
    if (port === undefined) continue;
    const ips = rule.anyPeer ? pod.ips : ipsInside(pod, rule);
    if (ips.ipv4.length === 0 && ips.ipv6.length === 0) continue;
    reach += JSON.stringify([key, port, ips.ipv4, ips.ipv6]);
  }
  return reach;
}

/**
 * A policy that a pod of any namespace can concern: through a namespaceSelector peer, or an egress named port that
 * resolves against pods beyond its selectors. The others concern only the pods of their own namespace.
 */
function isGlobal(parsed: ParsedPolicy): boolean {
  return parsed.usesNamespaceSelector || parsed.egressNamedPortsBeyond.length > 0;
}

function isTarget(parsed: ParsedPolicy, pod: PodView): boolean {
  return (
    pod.local &&
    pod.namespace === parsed.namespace &&
    (!parsed.targetSelector || parsed.targetSelector.matches(pod.labels))
  );
}

function peerSelects(peer: SelectorPeer, pod: PodView, namespaceLabels: Labels): boolean {
  if (peer.namespaceSelector ? !peer.namespaceSelector.matches(namespaceLabels) : pod.namespace !== peer.namespace) {
    return false;
  }
  return !peer.podSelector || peer.podSelector.matches(pod.labels);
}

function affectedByNamespaces(parsed: ParsedPolicy, changes: ClusterChanges): boolean {
  if (!parsed.usesNamespaceSelector || changes.namespaces.length === 0) return false;
  const selectors = parsed.selectorPeers.flatMap((peer) => (peer.namespaceSelector ? [peer.namespaceSelector] : []));
  return changes.namespaces.some((change) =>
    selectors.some((selector) => selector.matches(change.before) || selector.matches(change.after)),
  );
}

/**
 * Whether two objects of one policy hold the same content: the namespace, the name and the spec (other metadata, such
 * as resourceVersion or annotations, is irrelevant). Compared as values, not as JSON text: JSON writes NaN and the
 * infinities as null and leaves functions out, so a spec built in code or read from YAML (`.nan`) could change in a
 * way its JSON does not show. Only a new object of a policy already known is compared: the first compile of a large
 * cluster, where every policy is new, compares none.
 */
function samePolicyContent(before: NetworkPolicyLike, after: NetworkPolicyLike): boolean {
  try {
    return (
      before?.metadata?.namespace === after?.metadata?.namespace &&
      before?.metadata?.name === after?.metadata?.name &&
      isDeepStrictEqual(before?.spec, after?.spec)
    );
  } catch {
    // A field that cannot be read (a throwing getter): treat it as changed; parsePolicy reports what is wrong with it.
    return false;
  }
}
