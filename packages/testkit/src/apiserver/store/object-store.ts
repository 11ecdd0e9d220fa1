import { isDeepStrictEqual } from 'node:util';
import { alreadyExists, ApiError, badRequest, conflict, invalid, notFound } from '../errors.js';
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
import { generateNameSuffix, newUid, nowTimestamp, serverOwnedMetadata } from './object-meta.js';
import type { SchemaValidation } from './schema-validation.js';
import { ServiceAddressAllocator } from './service-allocator.js';
import { validateMetadataMaps, validateName } from './validation.js';

export interface Selectors {
  labelSelector?: LabelSelector;
  fieldSelector?: FieldSelector;
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
}

export interface StoreOptions {
  registry: ResourceRegistry;
  historyLimit: number;
  serviceCidrs: readonly string[];
  validation: SchemaValidation;
}

type StoreListener = (event: StoreEvent) => void;

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
  private readonly objects = new Map<string, Map<string, KubeObject>>();
  private readonly history: EventHistory;
  private readonly listeners = new Set<StoreListener>();
  private readonly allocator: ServiceAddressAllocator;
  private readonly validation: SchemaValidation;
  private revision = 0;

  constructor(options: StoreOptions) {
    this.registry = options.registry;
    this.history = new EventHistory(options.historyLimit);
    this.allocator = new ServiceAddressAllocator(options.serviceCidrs);
    this.validation = options.validation;
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
    const items: KubeObject[] = [];
    for (const stored of this.bucket(resource).values()) {
      if (namespace !== undefined && resource.namespaced && stored.metadata.namespace !== namespace) continue;
      const presented = this.present(resource, stored);
      if (this.matches(presented, selectors)) items.push(presented);
    }
    const sortKey = (obj: KubeObject): string => objectKey(obj.metadata.namespace, obj.metadata.name as string);
    return items.sort((a, b) => (sortKey(a) < sortKey(b) ? -1 : sortKey(a) > sortKey(b) ? 1 : 0));
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
    if (options.dryRun) return this.present(resource, current);
    if (resource.kind === 'Namespace' && resource.group === '') this.deleteNamespaceContents(name);
    return this.present(resource, this.commit('DELETED', resource, current));
  }

  deleteCollection(resource: ResourceType, namespace: string | undefined, selectors: Selectors, options: WriteOptions = {}): KubeObject[] {
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
    const event: StoreEvent = { type, resourceVersion: revision, key: storageKey(resource), object: stored, ...(previous ? { previous } : {}) };
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
      for (const obj of this.list(resource, namespace)) this.delete(resource, namespace, obj.metadata.name as string);
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

  private bucket(resource: ResourceType): Map<string, KubeObject> {
    const key = storageKey(resource);
    let bucket = this.objects.get(key);
    if (!bucket) {
      bucket = new Map();
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
