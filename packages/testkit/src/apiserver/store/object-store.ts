import { isDeepStrictEqual } from 'node:util';
import { alreadyExists, ApiError, badRequest, conflict, expired, invalid, notFound } from '../errors.js';
import type { KubeObject } from '../kube-object.js';
import { isPlainObject } from '../kube-object.js';
import type { ResourceRegistry, ResourceType } from '../resources.js';
import { storageKey } from '../resources.js';
import type { PatchType } from '../patch/apply-patch.js';
import { applyPatch } from '../patch/apply-patch.js';
import { findPrototypeKey } from '../patch/own-properties.js';
import type { FieldSelector } from '../selectors/field-selector.js';
import { matchesFieldSelector } from '../selectors/field-selector.js';
import type { LabelSelector } from '../selectors/label-selector.js';
import { matchesLabelSelector } from '../selectors/label-selector.js';
import { applyCreateDefaults, applyUpdateDefaults } from './defaults.js';
import type { StoreEvent } from './history.js';
import { EventHistory } from './history.js';
import { podGracefulDeletion } from './graceful-deletion.js';
import { generateNameSuffix, newUid, nowTimestamp, serverOwnedMetadata } from './object-meta.js';
import { OrderedObjects } from './ordered-objects.js';
import type { SchemaValidation } from './schema-validation.js';
import { ServiceAddressAllocator } from './service-allocator.js';
import { validateMetadataMaps, validateName } from './validation.js';

export interface Selectors {
  labelSelector?: LabelSelector;
  fieldSelector?: FieldSelector;
}

export interface ListPageRequest {
  /** At most this many objects; every one without it (or with 0). */
  limit?: number;
  /** Continue a list: the objects after `key` as they were at `resourceVersion`, the first page's. */
  continueFrom?: { resourceVersion: number; key: string };
  /**
   * The stored objects themselves instead of copies, for a caller that only serializes them (stored objects are never
   * mutated): a deep copy of every object was most of a page's cost.
   */
  shared?: boolean;
}

export interface ListPage {
  items: KubeObject[];
  /** The resourceVersion the whole list is consistent at: the first page's. */
  resourceVersion: number;
  /** When objects follow the page (matching the selectors or not, as etcd's paging counts keys): where the next page starts. */
  continueAfter?: string;
  /** How many objects follow the page; only for a list without selectors, which kube-apiserver also leaves it unset for. */
  remainingItemCount?: number;
}

export interface WriteOptions {
  /** Validate and compute the result without storing it (`?dryRun=All`). */
  dryRun?: boolean;
  /**
   * Check the object's labels, annotations and fields against its Kubernetes schema (its name is always checked);
   * default: as the server's SchemaValidation says for the resource.
   */
  validate?: boolean;
}

export interface UpdateOptions extends WriteOptions {
  /** 'status' writes only the status; the main resource keeps the stored status (for kinds with a status subresource). */
  subresource?: 'status';
}

export interface DeleteOptions extends WriteOptions {
  preconditions?: { uid?: string; resourceVersion?: string };
  /** DeleteOptions.gracePeriodSeconds; only Pods honour it, and only with `gracefulPodDeletion`. */
  gracePeriodSeconds?: number;
}

export interface StoreOptions {
  registry: ResourceRegistry;
  historyLimit: number;
  serviceCidrs: readonly string[];
  validation: SchemaValidation;
  /**
   * Delete Pods bound to a node gracefully, as kube-apiserver does: a DELETE marks the pod (deletionTimestamp,
   * deletionGracePeriodSeconds) and the kubelet removes it; default false: every DELETE removes the object at once.
   */
  gracefulPodDeletion?: boolean;
}

type StoreListener = (event: StoreEvent) => void;

/** The keys a list walks: those of one namespace (a prefix, as in etcd) from a lower bound on. */
interface KeyRange {
  prefix: string | undefined;
  lower: string | undefined;
  /** Whether the lower bound itself is left out (a continue key names the last object already returned). */
  exclusive: boolean;
}

function keyRange(namespace: string | undefined, after: string | undefined): KeyRange {
  const prefix = namespace === undefined ? undefined : `${namespace}/`;
  if (after !== undefined && (prefix === undefined || after >= prefix)) return { prefix, lower: after, exclusive: true };
  return { prefix, lower: prefix, exclusive: false };
}

function inRange(range: KeyRange, key: string): boolean {
  if (range.prefix !== undefined && !key.startsWith(range.prefix)) return false;
  return range.lower === undefined || (range.exclusive ? key > range.lower : key >= range.lower);
}

/**
 * The objects of `range` in key order as they were where `before` says (the state before later changes: an object,
 * or null for one that did not exist), merging those keys into the walk of the current ones.
 */
function* walk(bucket: OrderedObjects, range: KeyRange, before: ReadonlyMap<string, KubeObject | null>): Generator<[string, KubeObject]> {
  const changed = before.size === 0 ? [] : [...before.keys()].sort();
  const current = bucket.keys.from(range.lower, range.exclusive);
  let next = current.next();
  let c = 0;
  for (;;) {
    // Keys with the namespace's prefix are contiguous: the first key past them ends the walk.
    const now = next.done || (range.prefix !== undefined && !next.value.startsWith(range.prefix)) ? undefined : next.value;
    const then = changed[c];
    if (now === undefined && then === undefined) return;
    let key: string;
    if (then === undefined || (now !== undefined && now < then)) {
      key = now as string;
      next = current.next();
    } else {
      key = then;
      c++;
      if (now === then) next = current.next();
    }
    const obj = before.has(key) ? before.get(key) : bucket.get(key);
    if (obj) yield [key, obj];
  }
}

/** How many objects of the range come after `last`, as they were where `before` says. */
function remainingAfter(bucket: OrderedObjects, range: KeyRange, before: ReadonlyMap<string, KubeObject | null>, last: string): number {
  // The keys with a prefix ending in '/' are those below the same prefix ending in the next character, '0'.
  const end = range.prefix === undefined ? bucket.size : bucket.keys.countBefore(`${range.prefix.slice(0, -1)}0`);
  let remaining = end - bucket.keys.countBefore(last, true);
  for (const [key, then] of before) {
    if (key <= last || (range.prefix !== undefined && !key.startsWith(range.prefix))) continue;
    remaining += (then ? 1 : 0) - (bucket.has(key) ? 1 : 0);
  }
  return remaining;
}

const protectedNamespaces = new Set(['default', 'kube-system', 'kube-public']);

function objectKey(namespace: string | undefined, name: string): string {
  return `${namespace ?? ''}/${name}`;
}

function withoutVolatileMetadata(obj: KubeObject): KubeObject {
  const { resourceVersion: _rv, generation: _generation, ...metadata } = obj.metadata;
  return { ...obj, metadata };
}

function specOf(obj: KubeObject): Record<string, unknown> {
  const { metadata: _metadata, status: _status, ...rest } = obj;
  return rest;
}

/**
 * All objects of the embedded cluster, one resourceVersion counter for every change (as etcd's revision),
 * and a bounded history that watches resume from. Stored objects are replaced on every change and never
 * mutated, so events can share them; callers always get copies.
 */
export class ObjectStore {
  private readonly registry: ResourceRegistry;
  private readonly objects = new Map<string, OrderedObjects>();
  private readonly history: EventHistory;
  private readonly listeners = new Set<StoreListener>();
  private readonly allocator: ServiceAddressAllocator;
  private readonly validation: SchemaValidation;
  private readonly gracefulPodDeletion: boolean;
  private revision = 0;

  constructor(options: StoreOptions) {
    this.registry = options.registry;
    this.history = new EventHistory(options.historyLimit);
    this.allocator = new ServiceAddressAllocator(options.serviceCidrs);
    this.validation = options.validation;
    this.gracefulPodDeletion = options.gracefulPodDeletion ?? false;
  }

  get resourceVersion(): number {
    return this.revision;
  }

  subscribe(listener: StoreListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The changes after `resourceVersion`, or undefined when the history no longer reaches back that far. */
  changesSince(resourceVersion: number): readonly StoreEvent[] | undefined {
    return this.history.since(resourceVersion);
  }

  get oldestResumableResourceVersion(): number {
    return this.history.oldestResourceVersion;
  }

  /** Drops the whole history: a watch from any earlier resourceVersion is now expired. */
  compactHistory(): void {
    this.history.compact(this.revision);
  }

  // --- reads ---------------------------------------------------------------------------------------

  get(resource: ResourceType, namespace: string | undefined, name: string): KubeObject {
    const stored = this.bucket(resource).get(objectKey(this.scope(resource, namespace), name));
    if (!stored) throw notFound(resource, name);
    return this.present(resource, stored);
  }

  tryGet(resource: ResourceType, namespace: string | undefined, name: string): KubeObject | undefined {
    const stored = this.bucket(resource).get(objectKey(this.scope(resource, namespace), name));
    return stored ? this.present(resource, stored) : undefined;
  }

  /** Objects sorted by namespace and name (etcd key order), optionally within one namespace. */
  list(resource: ResourceType, namespace: string | undefined, selectors: Selectors = {}): KubeObject[] {
    return this.listPage(resource, namespace, selectors).items;
  }

  /**
   * One page of a list, in etcd key order (namespace/name). The collection's keys are kept sorted as they change, so
   * a page walks from its first key and stops after `limit` objects, filtering by the selectors on the way: it costs
   * what the page holds (plus the objects the selectors skip), not the collection. A continued page is served as the
   * collection was at the first page's resourceVersion, as etcd serves it: the changes made since then, which the
   * watch history holds, are undone on the way. A continue point older than that history is expired (410).
   */
  listPage(resource: ResourceType, namespace: string | undefined, selectors: Selectors, request: ListPageRequest = {}): ListPage {
    const { limit, continueFrom } = request;
    const view = (stored: KubeObject): KubeObject => (request.shared && !resource.storage ? stored : this.present(resource, stored));
    const bucket = this.bucket(resource);
    const range = keyRange(resource.namespaced ? namespace : undefined, continueFrom?.key);
    const before = continueFrom ? this.stateAt(resource, continueFrom.resourceVersion, range) : new Map<string, KubeObject | null>();
    const filtered = (selectors.labelSelector?.length ?? 0) > 0 || (selectors.fieldSelector?.length ?? 0) > 0;
    const items: KubeObject[] = [];
    let last: string | undefined;
    let more = false;
    for (const [key, stored] of walk(bucket, range, before)) {
      if (limit !== undefined && limit > 0 && items.length >= limit) {
        more = true;
        break;
      }
      last = key;
      if (!filtered) {
        items.push(view(stored));
      } else if (resource.storage) {
        // Selectors see the object as the client does (events.k8s.io Events are stored as core Events).
        const presented = this.present(resource, stored);
        if (this.matches(presented, selectors)) items.push(presented);
      } else if (this.matches(stored, selectors)) {
        items.push(view(stored));
      }
    }
    const page: ListPage = { items, resourceVersion: continueFrom?.resourceVersion ?? this.revision };
    if (!more || last === undefined) return page;
    page.continueAfter = last;
    if (!filtered) page.remainingItemCount = remainingAfter(bucket, range, before, last);
    return page;
  }

  matches(obj: KubeObject, selectors: Selectors): boolean {
    return (
      matchesLabelSelector(obj.metadata.labels, selectors.labelSelector ?? []) &&
      matchesFieldSelector(obj, selectors.fieldSelector ?? [])
    );
  }

  // --- writes --------------------------------------------------------------------------------------

  create(resource: ResourceType, input: KubeObject, options: WriteOptions = {}): KubeObject {
    const obj = this.normalize(resource, input);
    const name = this.assignName(resource, obj);
    if (resource.namespaced) {
      if (!obj.metadata.namespace) throw badRequest('the namespace of the object is required');
      this.requireNamespace(obj.metadata.namespace);
    } else {
      delete obj.metadata.namespace;
    }
    for (const field of serverOwnedMetadata) delete obj.metadata[field];

    const validate = this.validates(resource, options);
    const causes = [...validateName(resource, name), ...(validate ? validateMetadataMaps(obj.metadata) : [])];
    if (causes.length > 0) throw invalid(resource, name ?? '', causes);
    // Before the defaults, as a real server decodes before it defaults: they would hide a spec that is not an object.
    if (validate) this.checkSchema(resource, obj);
    causes.push(...applyCreateDefaults(obj, this.defaultingContext()));
    if (causes.length > 0) throw invalid(resource, name ?? '', causes);
    if (this.bucket(resource).has(objectKey(obj.metadata.namespace, name as string))) throw alreadyExists(resource, name as string);

    obj.metadata.uid = newUid();
    obj.metadata.creationTimestamp = nowTimestamp();
    obj.metadata.generation = 1;
    if (options.dryRun) return this.present(resource, { ...obj, metadata: { ...obj.metadata, resourceVersion: String(this.revision) } });
    return this.present(resource, this.commit('ADDED', resource, obj));
  }

  update(resource: ResourceType, input: KubeObject, options: UpdateOptions = {}): KubeObject {
    const incoming = this.normalize(resource, input);
    const name = incoming.metadata.name;
    if (!name) throw invalid(resource, '', validateName(resource, undefined));
    const namespace = this.scope(resource, incoming.metadata.namespace);
    const current = this.bucket(resource).get(objectKey(namespace, name));
    if (!current) throw notFound(resource, name);
    const requestedVersion = incoming.metadata.resourceVersion;
    if (requestedVersion !== undefined && requestedVersion !== '' && requestedVersion !== current.metadata.resourceVersion) {
      throw conflict(resource, name);
    }

    let next: KubeObject;
    if (options.subresource === 'status') {
      next = { ...current, status: incoming.status };
      if (incoming.status === undefined) delete next.status;
      if (this.validates(resource, options)) this.checkSchema(resource, next, 'status');
    } else {
      const causes = this.validates(resource, options) ? validateMetadataMaps(incoming.metadata) : [];
      if (causes.length > 0) throw invalid(resource, name, causes);
      next = { ...incoming, metadata: { ...incoming.metadata } };
      const metadata: Record<string, unknown> = next.metadata;
      for (const field of serverOwnedMetadata) {
        if (current.metadata[field] === undefined) delete metadata[field];
        else metadata[field] = current.metadata[field];
      }
      next.metadata.namespace = current.metadata.namespace;
      if (!resource.namespaced) delete next.metadata.namespace;
      if (resource.hasStatusSubresource) {
        if (current.status === undefined) delete next.status;
        else next.status = current.status;
      }
      if (this.validates(resource, options)) this.checkSchema(resource, next, resource.hasStatusSubresource ? 'main' : 'all');
      applyUpdateDefaults(next, current);
      if (!isDeepStrictEqual(specOf(next), specOf(current))) next.metadata.generation = (current.metadata.generation ?? 0) + 1;
    }

    // A write that changes nothing is not a change: no new resourceVersion, no watch event.
    if (isDeepStrictEqual(withoutVolatileMetadata(next), withoutVolatileMetadata(current)) || options.dryRun) {
      return this.present(resource, options.dryRun ? next : current);
    }
    return this.present(resource, this.commit('MODIFIED', resource, next, current));
  }

  patch(
    resource: ResourceType,
    namespace: string | undefined,
    name: string,
    type: PatchType,
    patch: unknown,
    options: UpdateOptions = {},
  ): KubeObject {
    const current = this.get(resource, namespace, name);
    const patched = applyPatch(current, type, patch);
    if (patched.metadata.name !== name || (resource.namespaced && patched.metadata.namespace !== current.metadata.namespace)) {
      throw invalid(resource, name, [{ reason: 'FieldValueInvalid', field: 'metadata.name', message: 'Invalid value: field is immutable' }]);
    }
    return this.update(resource, patched, options);
  }

  delete(resource: ResourceType, namespace: string | undefined, name: string, options: DeleteOptions = {}): KubeObject {
    const scope = this.scope(resource, namespace);
    const current = this.bucket(resource).get(objectKey(scope, name));
    if (!current) throw notFound(resource, name);
    const { uid, resourceVersion } = options.preconditions ?? {};
    if ((uid && uid !== current.metadata.uid) || (resourceVersion && resourceVersion !== current.metadata.resourceVersion)) {
      throw conflict(resource, name);
    }
    if (resource.kind === 'Namespace' && resource.group === '' && protectedNamespaces.has(name)) {
      throw new ApiError(403, 'Forbidden', `namespaces "${name}" is forbidden: this namespace may not be deleted`, {
        name,
        kind: 'namespaces',
      });
    }
    if (this.gracefulPodDeletion && resource.kind === 'Pod' && resource.group === '') {
      const deletion = podGracefulDeletion(current, options.gracePeriodSeconds, Date.now());
      if (deletion.action === 'pending') return this.present(resource, current);
      if (deletion.action === 'mark') {
        const generation = deletion.firstMark && typeof current.metadata.generation === 'number' ? current.metadata.generation + 1 : current.metadata.generation;
        const marked: KubeObject = {
          ...current,
          metadata: {
            ...current.metadata,
            deletionTimestamp: deletion.deletionTimestamp,
            deletionGracePeriodSeconds: deletion.deletionGracePeriodSeconds,
            ...(generation !== undefined ? { generation } : {}),
          },
        };
        return this.present(resource, options.dryRun ? marked : this.commit('MODIFIED', resource, marked, current));
      }
    }
    if (options.dryRun) return this.present(resource, current);
    if (resource.kind === 'Namespace' && resource.group === '') this.deleteNamespaceContents(name);
    return this.present(resource, this.commit('DELETED', resource, current));
  }

  deleteCollection(resource: ResourceType, namespace: string | undefined, selectors: Selectors, options: Omit<DeleteOptions, 'preconditions'> = {}): KubeObject[] {
    const deleted: KubeObject[] = [];
    for (const obj of this.list(resource, namespace, selectors)) {
      try {
        deleted.push(this.delete(resource, obj.metadata.namespace, obj.metadata.name as string, options));
      } catch (error) {
        // Protected namespaces stay, as in a real cluster; the rest of the collection still goes.
        if (!(error instanceof ApiError && error.code === 403)) throw error;
      }
    }
    return deleted;
  }

  // --- internals -----------------------------------------------------------------------------------

  private commit(type: StoreEvent['type'], resource: ResourceType, obj: KubeObject, previous?: KubeObject): KubeObject {
    const revision = ++this.revision;
    const stored: KubeObject = { ...obj, metadata: { ...obj.metadata, resourceVersion: String(revision) } };
    const bucket = this.bucket(resource);
    const key = objectKey(stored.metadata.namespace, stored.metadata.name as string);
    if (type === 'DELETED') bucket.delete(key);
    else bucket.set(key, stored);
    // A deleted object's last version is its previous one: a continued list undoes the deletion with it.
    const before = type === 'DELETED' ? obj : previous;
    const event: StoreEvent = { type, resourceVersion: revision, key: storageKey(resource), object: stored, ...(before ? { previous: before } : {}) };
    this.history.append(event);
    for (const listener of this.listeners) listener(event);
    return stored;
  }

  /** Whether this write is validated beyond its name: labels and annotations, and the schema. */
  private validates(resource: ResourceType, options: WriteOptions): boolean {
    return options.validate ?? this.validation.isEnabled(resource.plural);
  }

  /** Objects are checked in their stored form: events.k8s.io Events as the core Events they are stored as. */
  private checkSchema(resource: ResourceType, obj: KubeObject, part?: 'status' | 'main' | 'all'): void {
    this.validation.check(resource.storage?.resource ?? resource, obj, part);
  }

  private deleteNamespaceContents(namespace: string): void {
    const seen = new Set<string>();
    for (const resource of this.registry.resources) {
      if (!resource.namespaced || resource.storage || seen.has(storageKey(resource))) continue;
      seen.add(storageKey(resource));
      // At once, pods too: this store has no Terminating namespace that would wait for them to go.
      for (const obj of this.list(resource, namespace)) this.delete(resource, namespace, obj.metadata.name as string, { gracePeriodSeconds: 0 });
    }
  }

  private requireNamespace(namespace: string): void {
    const namespaces = this.registry.byKind('v1', 'Namespace');
    if (namespaces && !this.bucket(namespaces).has(objectKey(undefined, namespace))) throw notFound(namespaces, namespace);
  }

  /** A deep copy in the stored form, with apiVersion and kind checked against the resource. */
  private normalize(resource: ResourceType, input: KubeObject): KubeObject {
    if (!isPlainObject(input)) throw badRequest('the object must be a JSON object');
    const prototypeField = findPrototypeKey(input);
    if (prototypeField !== undefined) throw badRequest(`the object could not be decoded: strict decoding error: unknown field "${prototypeField}"`);
    const obj = structuredClone(input) as KubeObject;
    obj.apiVersion ??= resource.apiVersion;
    obj.kind ??= resource.kind;
    if (obj.apiVersion !== resource.apiVersion || obj.kind !== resource.kind) {
      throw badRequest(`the API version in the data (${obj.apiVersion}) and kind (${obj.kind}) do not match ${resource.apiVersion} ${resource.kind}`);
    }
    if (!isPlainObject(obj.metadata)) obj.metadata = {};
    return resource.storage ? resource.storage.toStorage(obj) : obj;
  }

  private assignName(resource: ResourceType, obj: KubeObject): string | undefined {
    if (!obj.metadata.name && obj.metadata.generateName) {
      const bucket = this.bucket(resource);
      do {
        obj.metadata.name = `${obj.metadata.generateName}${generateNameSuffix()}`;
      } while (bucket.has(objectKey(obj.metadata.namespace, obj.metadata.name)));
    }
    return obj.metadata.name;
  }

  private present(resource: ResourceType, stored: KubeObject): KubeObject {
    const copy = structuredClone(stored);
    return resource.storage ? resource.storage.fromStorage(copy) : copy;
  }

  private scope(resource: ResourceType, namespace: string | undefined): string | undefined {
    return resource.namespaced ? namespace : undefined;
  }

  /**
   * What the changes after `resourceVersion` replaced within `range`: each changed key's object as it was then, or
   * null where it did not exist yet. Costs the history since then, which is bounded by its limit.
   */
  private stateAt(resource: ResourceType, resourceVersion: number, range: KeyRange): Map<string, KubeObject | null> {
    const changes = this.history.since(resourceVersion);
    if (!changes) {
      throw expired('The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.');
    }
    const bucketKey = storageKey(resource);
    const before = new Map<string, KubeObject | null>();
    for (const change of changes) {
      if (change.key !== bucketKey) continue;
      const key = objectKey(change.object.metadata.namespace, change.object.metadata.name as string);
      // The first change after the snapshot says what was there before it.
      if (!inRange(range, key) || before.has(key)) continue;
      before.set(key, change.type === 'ADDED' ? null : (change.previous ?? null));
    }
    return before;
  }

  private bucket(resource: ResourceType): OrderedObjects {
    const key = storageKey(resource);
    let bucket = this.objects.get(key);
    if (!bucket) {
      bucket = new OrderedObjects();
      this.objects.set(key, bucket);
    }
    return bucket;
  }

  private defaultingContext() {
    const services = () => {
      const resource = this.registry.byKind('v1', 'Service');
      return resource ? [...this.bucket(resource).values()] : [];
    };
    return {
      allocator: this.allocator,
      usedClusterIps: () =>
        new Set(services().flatMap((svc) => (isPlainObject(svc.spec) && Array.isArray(svc.spec.clusterIPs) ? (svc.spec.clusterIPs as string[]) : []))),
      usedNodePorts: () =>
        new Set(
          services().flatMap((svc) =>
            isPlainObject(svc.spec) && Array.isArray(svc.spec.ports)
              ? svc.spec.ports.flatMap((port: unknown) => (isPlainObject(port) && typeof port.nodePort === 'number' ? [port.nodePort] : []))
              : [],
          ),
        ),
    };
  }
}
