import type { PerFamily, PodProblem } from './model.js';
import { namespaceLabels, podView, samePodView } from './pods.js';
import type { PodView } from './pods.js';
import { compareText, sortedUnique } from './sort.js';
import { runToEnd } from './steps.js';
import type { Steps } from './steps.js';
import type { Labels, NamespaceLike, PodLike } from './types.js';

export interface PodChange {
  readonly before: PodView | undefined;
  readonly after: PodView | undefined;
}

export interface NamespaceChange {
  readonly name: string;
  readonly before: Labels;
  readonly after: Labels;
}

export interface ClusterChanges {
  readonly pods: readonly PodChange[];
  readonly namespaces: readonly NamespaceChange[];
}

/**
 * The objects of one kind added, changed or deleted since the last compile, each key once with its latest state, as
 * an informer's events give them: an object upserted is the cache's current one, an object deleted is the last one seen.
 */
export interface ObjectChanges<T> {
  readonly upserted: readonly T[];
  readonly deleted: readonly T[];
}

/** What the policy resolver reads: actionable pods by namespace and namespaces with their labels. */
export interface ClusterView {
  podsIn(namespace: string): Iterable<PodView>;
  localPodsIn(namespace: string): Iterable<PodView>;
  localPods(): Iterable<PodView>;
  /** Every namespace that has an object or a pod, with its labels. */
  namespaces(): Iterable<readonly [string, Labels]>;
  /** The pods that define a named port (`name/PROTOCOL`). */
  podsWithNamedPort(key: string): Iterable<PodView>;
  /**
   * A named port resolved against every pod: port number -> the IPs of the pods that give the name that number.
   * The lists are shared by every caller until a pod defining the port changes; they must not be modified.
   */
  namedPortDestinations(key: string): ReadonlyMap<number, PerFamily<readonly string[]>>;
}

/** Pods read between two yields of updateSteps: about a millisecond of work. */
const POD_BATCH = 64;

interface PodEntry {
  readonly key: string;
  readonly source: PodLike;
  readonly view: PodView | undefined;
  /** The last update whose input held this pod. */
  seen: number;
}

interface NamespaceEntry {
  readonly source: NamespaceLike;
  readonly labels: Labels;
  readonly signature: string;
}

/**
 * The cluster as the compiler last saw it, updated from full lists (level-triggered) and reporting what changed.
 * An object passed again unchanged (the same instance, as informer caches hand out) costs one identity check;
 * otherwise only the fields the compiler reads are compared.
 */
export class ClusterIndex implements ClusterView {
  readonly #nodeName: string;
  readonly #pods = new Map<string, PodEntry>();
  /** Finds the entry of an object passed before without building its key. */
  readonly #bySource = new WeakMap<PodLike, PodEntry>();
  #generation = 0;
  readonly #byNamespace = new Map<string, Map<string, PodView>>();
  readonly #localByNamespace = new Map<string, Map<string, PodView>>();
  #namespaces = new Map<string, NamespaceEntry>();
  readonly #byNamedPort = new Map<string, Map<string, PodView>>();
  readonly #destinations = new Map<string, ReadonlyMap<number, PerFamily<readonly string[]>>>();
  readonly #podProblems = new Map<string, readonly PodProblem[]>();

  constructor(nodeName: string) {
    this.#nodeName = nodeName;
  }

  update(pods: readonly PodLike[], namespaces: readonly NamespaceLike[]): ClusterChanges {
    return runToEnd(this.updateSteps(pods, namespaces));
  }

  /** update() as steps of POD_BATCH pods. */
  *updateSteps(pods: readonly PodLike[], namespaces: readonly NamespaceLike[]): Steps<ClusterChanges> {
    const namespaceChanges = this.#updateNamespaces(namespaces);
    return { pods: yield* this.#updatePods(pods), namespaces: namespaceChanges };
  }

  /**
   * Applies the objects that changed, reading only those: what an event costs no longer grows with the cluster. The
   * result is what update() with the full lists after the same changes gives. Objects without a string namespace and
   * name (which an informer, keying by them, never hands out) are left out.
   */
  *applySteps(pods: ObjectChanges<PodLike>, namespaces: ObjectChanges<NamespaceLike>): Steps<ClusterChanges> {
    const namespaceChanges = this.#applyNamespaces(namespaces);
    const changes: PodChange[] = [];
    let visited = 0;
    for (const pod of readableEntries(pods.deleted)) {
      if (++visited % POD_BATCH === 0) yield;
      const key = podKey(pod);
      if (key === undefined) continue;
      const previous = this.#pods.get(key);
      if (!previous) continue;
      this.#pods.delete(key);
      if (previous.view) changes.push({ before: previous.view, after: undefined });
    }
    for (const pod of readableEntries(pods.upserted)) {
      if (++visited % POD_BATCH === 0) yield;
      const known = typeof pod === 'object' && pod !== null ? this.#bySource.get(pod) : undefined;
      if (known && this.#pods.get(known.key) === known) continue;
      const read = readPod(pod, this.#nodeName);
      if (!read) continue;
      const { key, view } = read;
      const previous = this.#pods.get(key);
      // Seen by the current generation: a full update later counts it like any other pod it meets.
      const entry: PodEntry = { key, source: pod, view, seen: this.#generation };
      this.#pods.set(key, entry);
      if (typeof pod === 'object' && pod !== null) this.#bySource.set(pod, entry);
      if (!samePodView(previous?.view, view)) changes.push({ before: previous?.view, after: view });
    }
    this.#reindex(changes);
    return { pods: changes, namespaces: namespaceChanges };
  }

  *#updatePods(pods: readonly PodLike[]): Steps<PodChange[]> {
    const generation = ++this.#generation;
    const changes: PodChange[] = [];
    let seen = 0;
    let visited = 0;
    for (const pod of readableEntries(pods)) {
      if (++visited % POD_BATCH === 0) yield;
      const known = typeof pod === 'object' && pod !== null ? this.#bySource.get(pod) : undefined;
      if (known && this.#pods.get(known.key) === known) {
        if (known.seen !== generation) {
          known.seen = generation;
          seen++;
        }
        continue;
      }
      const read = readPod(pod, this.#nodeName);
      // Without a string namespace and name a pod can be neither target nor peer; keying it by a coerced name
      // (['web'] reads as "web") would let it replace the real pod of that name.
      if (!read) continue;
      const { key, view } = read;
      const previous = this.#pods.get(key);
      const entry: PodEntry = { key, source: pod, view, seen: generation };
      this.#pods.set(key, entry);
      if (typeof pod === 'object' && pod !== null) this.#bySource.set(pod, entry);
      if (previous?.seen !== generation) seen++;
      if (!samePodView(previous?.view, view)) changes.push({ before: previous?.view, after: view });
    }
    if (seen < this.#pods.size) {
      for (const [key, entry] of this.#pods) {
        if (entry.seen === generation) continue;
        this.#pods.delete(key);
        if (entry.view) changes.push({ before: entry.view, after: undefined });
      }
    }
    this.#reindex(changes);
    return changes;
  }

  #reindex(changes: readonly PodChange[]): void {
    for (const change of changes) {
      if (change.before) this.#unindex(change.before);
      if (change.after) this.#index(change.after);
    }
  }

  #updateNamespaces(namespaces: readonly NamespaceLike[]): NamespaceChange[] {
    const next = new Map<string, NamespaceEntry>();
    for (const namespace of readableEntries(namespaces)) {
      const name = namespaceName(namespace);
      if (name === undefined) continue;
      const previous = this.#namespaces.get(name);
      next.set(name, previous?.source === namespace ? previous : namespaceEntry(namespace));
    }
    const changes: NamespaceChange[] = [];
    for (const name of new Set([...this.#namespaces.keys(), ...next.keys()])) {
      const change = namespaceChange(name, this.#namespaces.get(name), next.get(name));
      if (change) changes.push(change);
    }
    this.#namespaces = next;
    return changes;
  }

  #applyNamespaces(namespaces: ObjectChanges<NamespaceLike>): NamespaceChange[] {
    const changes: NamespaceChange[] = [];
    const set = (name: string, after: NamespaceEntry | undefined) => {
      const before = this.#namespaces.get(name);
      if (after) this.#namespaces.set(name, after);
      else this.#namespaces.delete(name);
      const change = namespaceChange(name, before, after);
      if (change) changes.push(change);
    };
    for (const namespace of readableEntries(namespaces.deleted)) {
      const name = namespaceName(namespace);
      if (name !== undefined) set(name, undefined);
    }
    for (const namespace of readableEntries(namespaces.upserted)) {
      const name = namespaceName(namespace);
      if (name === undefined || this.#namespaces.get(name)?.source === namespace) continue;
      set(name, namespaceEntry(namespace));
    }
    return changes;
  }

  #index(view: PodView): void {
    indexInto(this.#byNamespace, view.namespace, view);
    if (view.local) indexInto(this.#localByNamespace, view.namespace, view);
    for (const key of view.namedPorts.keys()) {
      indexInto(this.#byNamedPort, key, view);
      this.#destinations.delete(key);
    }
    if (view.problems.length > 0) this.#podProblems.set(view.id, view.problems);
  }

  #unindex(view: PodView): void {
    this.#byNamespace.get(view.namespace)?.delete(view.id);
    this.#localByNamespace.get(view.namespace)?.delete(view.id);
    for (const key of view.namedPorts.keys()) {
      this.#byNamedPort.get(key)?.delete(view.id);
      this.#destinations.delete(key);
    }
    this.#podProblems.delete(view.id);
  }

  podsWithNamedPort(key: string): Iterable<PodView> {
    return this.#byNamedPort.get(key)?.values() ?? [];
  }

  namedPortDestinations(key: string): ReadonlyMap<number, PerFamily<readonly string[]>> {
    let destinations = this.#destinations.get(key);
    if (destinations) return destinations;
    const byNumber = new Map<number, { ipv4: string[]; ipv6: string[] }>();
    for (const pod of this.podsWithNamedPort(key)) {
      const port = pod.namedPorts.get(key) as number;
      let ips = byNumber.get(port);
      if (!ips) {
        ips = { ipv4: [], ipv6: [] };
        byNumber.set(port, ips);
      }
      ips.ipv4.push(...pod.ips.ipv4);
      ips.ipv6.push(...pod.ips.ipv6);
    }
    destinations = new Map(
      [...byNumber].map(([port, ips]) => [port, { ipv4: sortedUnique(ips.ipv4), ipv6: sortedUnique(ips.ipv6) }]),
    );
    this.#destinations.set(key, destinations);
    return destinations;
  }

  /** Every pod's problems, sorted by pod and path. */
  podProblems(): PodProblem[] {
    return [...this.#podProblems.values()]
      .flat()
      .sort((a, b) => compareText(a.pod, b.pod) || compareText(a.path, b.path) || compareText(a.message, b.message));
  }

  podsIn(namespace: string): Iterable<PodView> {
    return this.#byNamespace.get(namespace)?.values() ?? [];
  }

  localPodsIn(namespace: string): Iterable<PodView> {
    return this.#localByNamespace.get(namespace)?.values() ?? [];
  }

  *allPods(): Iterable<PodView> {
    for (const pods of this.#byNamespace.values()) yield* pods.values();
  }

  *localPods(): Iterable<PodView> {
    for (const pods of this.#localByNamespace.values()) yield* pods.values();
  }

  namespaceLabels(name: string): Labels {
    return this.#namespaces.get(name)?.labels ?? implicitLabels(name);
  }

  *namespaces(): Iterable<readonly [string, Labels]> {
    for (const [name, entry] of this.#namespaces) yield [name, entry.labels];
    for (const [name, pods] of this.#byNamespace) {
      if (!this.#namespaces.has(name) && pods.size > 0) yield [name, implicitLabels(name)];
    }
  }
}

function indexInto(index: Map<string, Map<string, PodView>>, key: string, view: PodView): void {
  let pods = index.get(key);
  if (!pods) {
    pods = new Map();
    index.set(key, pods);
  }
  pods.set(view.id, view);
}

function namespaceName(namespace: NamespaceLike): string | undefined {
  try {
    const name: unknown = namespace?.metadata?.name;
    return typeof name === 'string' && name !== '' ? name : undefined;
  } catch {
    return undefined;
  }
}

function namespaceEntry(namespace: NamespaceLike): NamespaceEntry {
  let labels: Labels;
  try {
    labels = namespaceLabels(namespace.metadata?.labels);
  } catch {
    // Labels that cannot be read are no labels; the implicit name label still applies.
    labels = {};
  }
  return { source: namespace, labels, signature: labelSignature(labels) };
}

function namespaceChange(
  name: string,
  before: NamespaceEntry | undefined,
  after: NamespaceEntry | undefined,
): NamespaceChange | undefined {
  if (before?.signature === after?.signature) return undefined;
  return { name, before: before?.labels ?? implicitLabels(name), after: after?.labels ?? implicitLabels(name) };
}

/** The key of a pod, as readPod gives it; undefined when it has no string namespace and name. */
function podKey(pod: PodLike): string | undefined {
  try {
    const namespace: unknown = pod?.metadata?.namespace;
    const name: unknown = pod?.metadata?.name;
    if (typeof namespace !== 'string' || typeof name !== 'string') return undefined;
    // The namespace's length keeps `a/b` + `c` apart from `a` + `b/c` (a malformed name may hold a slash).
    return `${namespace.length}:${namespace}/${name}`;
  } catch {
    return undefined;
  }
}

/**
 * The pod's key and view, or undefined when it has no string namespace and name. An object whose fields cannot be
 * read (a throwing getter) is kept under its key with no view: it selects nothing, like a pod without an IP.
 */
function readPod(pod: PodLike, nodeName: string): { key: string; view: PodView | undefined } | undefined {
  const key = podKey(pod);
  if (key === undefined) return undefined;
  try {
    return { key, view: podView(pod, nodeName) };
  } catch {
    return { key, view: undefined };
  }
}

/**
 * The entries of a list that can be read. Compile input comes from caches that hold whatever the API sent; a list
 * that is not an array, or an entry that throws when read, is left out instead of throwing out of the compile.
 */
export function readableEntries<T>(list: readonly T[]): T[] {
  const entries: T[] = [];
  try {
    if (!Array.isArray(list)) return entries;
    const length = list.length;
    for (let index = 0; index < length; index++) {
      try {
        entries.push(list[index] as T);
      } catch {
        // An unreadable entry is skipped; the others still count.
      }
    }
  } catch {
    // The list itself cannot be read (a hostile proxy): what was read so far is all there is.
  }
  return entries;
}

/**
 * The label the API server puts on every namespace. A namespace whose object has not arrived yet (informers race)
 * gets it, so that `kubernetes.io/metadata.name` selectors and `{}` still see its pods.
 */
function implicitLabels(name: string): Labels {
  return { 'kubernetes.io/metadata.name': name };
}

function labelSignature(labels: Labels): string {
  return JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
