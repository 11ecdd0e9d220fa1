import { namespaceLabels, podView } from './pods.js';
import type { PodView } from './pods.js';
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

/** What the policy resolver reads: actionable pods by namespace and namespaces with their labels. */
export interface ClusterView {
  podsIn(namespace: string): Iterable<PodView>;
  localPodsIn(namespace: string): Iterable<PodView>;
  allPods(): Iterable<PodView>;
  localPods(): Iterable<PodView>;
  /** Every namespace that has an object or a pod, with its labels. */
  namespaces(): Iterable<readonly [string, Labels]>;
}

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

  constructor(nodeName: string) {
    this.#nodeName = nodeName;
  }

  update(pods: readonly PodLike[], namespaces: readonly NamespaceLike[]): ClusterChanges {
    const namespaceChanges = this.#updateNamespaces(namespaces);
    return { pods: this.#updatePods(pods), namespaces: namespaceChanges };
  }

  #updatePods(pods: readonly PodLike[]): PodChange[] {
    const generation = ++this.#generation;
    const changes: PodChange[] = [];
    let seen = 0;
    for (const pod of pods) {
      const known = this.#bySource.get(pod);
      if (known && this.#pods.get(known.key) === known) {
        if (known.seen !== generation) {
          known.seen = generation;
          seen++;
        }
        continue;
      }
      const key = `${pod?.metadata?.namespace ?? ''}/${pod?.metadata?.name ?? ''}`;
      const previous = this.#pods.get(key);
      const view = podView(pod, this.#nodeName);
      const entry: PodEntry = { key, source: pod, view, seen: generation };
      this.#pods.set(key, entry);
      if (typeof pod === 'object' && pod !== null) this.#bySource.set(pod, entry);
      if (previous?.seen !== generation) seen++;
      if (previous?.view?.signature !== view?.signature) changes.push({ before: previous?.view, after: view });
    }
    if (seen < this.#pods.size) {
      for (const [key, entry] of this.#pods) {
        if (entry.seen === generation) continue;
        this.#pods.delete(key);
        if (entry.view) changes.push({ before: entry.view, after: undefined });
      }
    }
    for (const change of changes) {
      if (change.before) this.#unindex(change.before);
      if (change.after) this.#index(change.after);
    }
    return changes;
  }

  #updateNamespaces(namespaces: readonly NamespaceLike[]): NamespaceChange[] {
    const next = new Map<string, NamespaceEntry>();
    for (const namespace of namespaces) {
      const name = namespace?.metadata?.name;
      if (typeof name !== 'string' || name === '') continue;
      const previous = this.#namespaces.get(name);
      if (previous?.source === namespace) {
        next.set(name, previous);
        continue;
      }
      const labels = namespaceLabels(namespace.metadata?.labels);
      next.set(name, { source: namespace, labels, signature: labelSignature(labels) });
    }
    const changes: NamespaceChange[] = [];
    for (const name of new Set([...this.#namespaces.keys(), ...next.keys()])) {
      const before = this.#namespaces.get(name);
      const after = next.get(name);
      if (before?.signature === after?.signature) continue;
      changes.push({
        name,
        before: before?.labels ?? implicitLabels(name),
        after: after?.labels ?? implicitLabels(name),
      });
    }
    this.#namespaces = next;
    return changes;
  }

  #index(view: PodView): void {
    indexInto(this.#byNamespace, view);
    if (view.local) indexInto(this.#localByNamespace, view);
  }

  #unindex(view: PodView): void {
    this.#byNamespace.get(view.namespace)?.delete(view.id);
    this.#localByNamespace.get(view.namespace)?.delete(view.id);
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

function indexInto(index: Map<string, Map<string, PodView>>, view: PodView): void {
  let pods = index.get(view.namespace);
  if (!pods) {
    pods = new Map();
    index.set(view.namespace, pods);
  }
  pods.set(view.id, view);
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
