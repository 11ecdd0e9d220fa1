// What kube-controller-manager's EndpointSlice controller and kube-apiserver's `kubernetes` Service reconciler do, run
// inside the embedded API server: slices written through the server's own store, so that watches see them change.
import { isDeepStrictEqual } from 'node:util';
import ipaddr from 'ipaddr.js';
import { ApiError } from './errors.js';
import type { KubeObject } from './kube-object.js';
import { isPlainObject } from './kube-object.js';
import type { ResourceRegistry, ResourceType } from './resources.js';
import { storageKey } from './resources.js';
import {
  ENDPOINTSLICE_CONTROLLER_NAME,
  LABEL_MANAGED_BY,
  LABEL_SERVICE_NAME,
  LABEL_TOPOLOGY_ZONE,
  isPodReady,
  reconcileEndpointSlices,
} from './endpointslice-reconciler.js';
import { ipFamilyOf } from './store/ip-address.js';
import type { StoreEvent } from './store/history.js';
import type { ObjectStore } from './store/object-store.js';

export interface EndpointSliceControllerOptions {
  /** kube-controller-manager's --max-endpoints-per-slice; default 100. */
  maxEndpointsPerSlice?: number;
  /**
   * The address the `kubernetes` Service's EndpointSlice names (kube-apiserver's --advertise-address); default the
   * server's `host` when it is an address other than 0.0.0.0 or ::, else 127.0.0.1.
   */
  advertiseAddress?: string;
}

/** Where the `kubernetes` Service points: the API server's address and port, and the first service CIDR. */
export interface ApiServerEndpoint {
  address: string;
  port: number;
  serviceCidr: string;
}

type Json = Record<string, unknown>;

const kubernetesServiceKey = 'default/kubernetes';
/** A queue key no Service can have (names never hold a NUL): the `kubernetes` Service and its slice. */
const kubernetesQueueKey = '\0kubernetes';
/** How long one turn of the queue may hold the event loop before it yields to requests. */
const turnBudgetMs = 10;
// client-go's default controller rate limiter: 5 ms doubling per failure, and kube-controller-manager's 15 retries.
const retryBaseMs = 5;
const retryMaxMs = 5_000;
const maxRetries = 15;

const specOf = (obj: KubeObject | undefined): Json => (obj && isPlainObject(obj.spec) ? obj.spec : {});
const statusOf = (obj: KubeObject | undefined): Json => (obj && isPlainObject(obj.status) ? obj.status : {});
const keyOf = (namespace: string | undefined, name: string | undefined): string => `${namespace ?? ''}/${name ?? ''}`;
const labelPair = (key: string, value: string): string => `${key}\0${value}`;

/**
 * A Service's selector, or undefined for a Service the controller leaves alone: ExternalName, or no selector. An empty
 * `selector: {}` is none, as in a cluster, where the stored (protobuf) form of an empty map reads back as absent.
 */
function selectorOf(service: KubeObject): Record<string, string> | undefined {
  const spec = specOf(service);
  if (spec.type === 'ExternalName' || !isPlainObject(spec.selector) || Object.keys(spec.selector).length === 0) return undefined;
  return Object.fromEntries(Object.entries(spec.selector).map(([key, value]) => [key, String(value)]));
}

function matches(selector: Record<string, string>, labels: Record<string, string> | undefined): boolean {
  for (const [key, value] of Object.entries(selector)) if (labels?.[key] !== value) return false;
  return true;
}

/** Whether a pod changed in a way its endpoints show (podEndpointsChanged, plus phase, node and declared ports). */
function podEndpointsChanged(before: KubeObject, after: KubeObject): boolean {
  const view = (pod: KubeObject) => {
    const spec = specOf(pod);
    const status = statusOf(pod);
    return [
      pod.metadata.labels ?? {},
      pod.metadata.deletionTimestamp ?? null,
      spec.hostname ?? null,
      spec.subdomain ?? null,
      spec.nodeName ?? null,
      spec.containers ?? null,
      spec.initContainers ?? null,
      status.phase ?? null,
      status.podIP ?? null,
      status.podIPs ?? null,
      isPodReady(pod),
    ];
  };
  return !isDeepStrictEqual(view(before), view(after));
}

/** The first host address of a CIDR: kube-apiserver's address for the `kubernetes` Service. */
export function firstHostOf(cidr: string): string {
  const [address, prefix] = ipaddr.parseCIDR(cidr);
  const bytes = address.toByteArray();
  let carry = 1;
  const network = bytes.map((byte, index) => {
    const bitsBefore = index * 8;
    const keep = Math.max(0, Math.min(8, prefix - bitsBefore));
    return byte & ((0xff << (8 - keep)) & 0xff);
  });
  for (let index = network.length - 1; index >= 0 && carry > 0; index--) {
    const sum = network[index]! + carry;
    network[index] = sum & 0xff;
    carry = sum >> 8;
  }
  const host = ipaddr.fromByteArray(network);
  return host.kind() === 'ipv6' ? (host as ipaddr.IPv6).toRFC5952String() : host.toString();
}

/**
 * Keeps an EndpointSlice per address family (and per distinct set of resolved ports) for every Service with a
 * selector, from the pods it selects and their Nodes, as kube-controller-manager does. Store events only queue the
 * Services they concern; a later turn of the event loop reconciles each queued Service once, however many events
 * queued it (level-triggered, coalesced). Failures are retried with backoff; other Services go on.
 */
export class EndpointSliceController {
  private readonly resources: { services: ResourceType; pods: ResourceType; nodes: ResourceType; slices: ResourceType; events: ResourceType };
  private readonly keys: { services: string; pods: string; nodes: string; slices: string };
  private readonly services = new Map<string, KubeObject>();
  /** namespace → `key\0value` of each selector requirement → the Services whose selector has it. */
  private readonly servicesBySelector = new Map<string, Map<string, Set<string>>>();
  private readonly pods = new Map<string, Map<string, KubeObject>>();
  /** namespace → `key\0value` of a label → pod names. */
  private readonly podsByLabel = new Map<string, Map<string, Set<string>>>();
  private readonly podsByNode = new Map<string, Set<string>>();
  private readonly nodes = new Map<string, KubeObject>();
  /** `namespace/service` → slice name → the managed slice as stored. */
  private readonly slices = new Map<string, Map<string, KubeObject>>();
  /** `namespace/slice` → the `namespace/service` it is filed under in `slices`. */
  private readonly sliceOwners = new Map<string, string>();
  /** Queued keys, each with the time of the first change it has not reflected yet. */
  private readonly pending = new Map<string, number>();
  private readonly attempts = new Map<string, number>();
  private readonly retryTimers = new Map<string, NodeJS.Timeout>();
  private unsubscribe: (() => void) | undefined;
  private turn: NodeJS.Immediate | undefined;
  private writing = false;
  private stopped = false;

  constructor(
    private readonly store: ObjectStore,
    registry: ResourceRegistry,
    private readonly options: EndpointSliceControllerOptions = {},
    private readonly apiServer?: ApiServerEndpoint,
  ) {
    const resource = (apiVersion: string, kind: string): ResourceType => {
      const found = registry.byKind(apiVersion, kind);
      if (!found) throw new Error(`the EndpointSlice controller needs ${apiVersion} ${kind}, which this server does not serve`);
      return found;
    };
    this.resources = {
      services: resource('v1', 'Service'),
      pods: resource('v1', 'Pod'),
      nodes: resource('v1', 'Node'),
      slices: resource('discovery.k8s.io/v1', 'EndpointSlice'),
      events: resource('v1', 'Event'),
    };
    this.keys = {
      services: storageKey(this.resources.services),
      pods: storageKey(this.resources.pods),
      nodes: storageKey(this.resources.nodes),
      slices: storageKey(this.resources.slices),
    };
  }

  /** Reads what the store holds, then follows its changes; every Service is queued once. */
  start(): void {
    this.unsubscribe = this.store.subscribe((event) => this.onEvent(event));
    for (const node of this.store.list(this.resources.nodes, undefined)) this.nodes.set(node.metadata.name ?? '', node);
    for (const pod of this.store.list(this.resources.pods, undefined)) this.indexPod(pod);
    for (const slice of this.store.list(this.resources.slices, undefined)) this.indexSlice(slice);
    for (const service of this.store.list(this.resources.services, undefined)) this.indexService(service);
    const now = Date.now();
    for (const key of new Set([...this.services.keys(), ...this.slices.keys()])) this.enqueue(key, now);
    if (this.apiServer) this.enqueue(kubernetesQueueKey, now);
  }

  stop(): void {
    this.stopped = true;
    this.unsubscribe?.();
    if (this.turn) clearImmediate(this.turn);
    for (const timer of this.retryTimers.values()) clearTimeout(timer);
    this.retryTimers.clear();
    this.pending.clear();
  }

  // --- events: cheap, synchronous, only index and queue -----------------------------------------------

  private onEvent(event: StoreEvent): void {
    if (this.stopped) return;
    if (event.key === this.keys.pods) this.onPod(event);
    else if (event.key === this.keys.services) this.onService(event);
    else if (event.key === this.keys.slices) this.onSlice(event);
    else if (event.key === this.keys.nodes) this.onNode(event);
  }

  private onService(event: StoreEvent): void {
    const service = event.object;
    const key = keyOf(service.metadata.namespace, service.metadata.name);
    this.unindexService(key);
    if (event.type !== 'DELETED') this.indexService(service);
    this.enqueue(key);
    if (key === kubernetesServiceKey && this.apiServer) this.enqueue(kubernetesQueueKey);
  }

  private onPod(event: StoreEvent): void {
    const pod = event.object;
    const namespace = pod.metadata.namespace ?? '';
    const before = this.pods.get(namespace)?.get(pod.metadata.name ?? '');
    if (event.type === 'MODIFIED' && before && !podEndpointsChanged(before, pod)) {
      this.indexPod(pod);
      return;
    }
    const affected = new Set<string>();
    if (before) this.servicesSelecting(namespace, before.metadata.labels, affected);
    this.unindexPod(namespace, pod.metadata.name ?? '');
    if (event.type !== 'DELETED') {
      this.indexPod(pod);
      this.servicesSelecting(namespace, pod.metadata.labels, affected);
    }
    for (const key of affected) this.enqueue(key);
  }

  private onNode(event: StoreEvent): void {
    const node = event.object;
    const name = node.metadata.name ?? '';
    const before = this.nodes.get(name);
    if (event.type === 'DELETED') this.nodes.delete(name);
    else this.nodes.set(name, node);
    // A Node's zone is in its pods' endpoints; a Node that appears lets its pods in.
    const zoneOf = (obj: KubeObject | undefined) => obj?.metadata.labels?.[LABEL_TOPOLOGY_ZONE];
    if (event.type === 'MODIFIED' && before && zoneOf(before) === zoneOf(node)) return;
    const affected = new Set<string>();
    for (const podKey of this.podsByNode.get(name) ?? []) {
      const [namespace = '', podName = ''] = podKey.split('/');
      this.servicesSelecting(namespace, this.pods.get(namespace)?.get(podName)?.metadata.labels, affected);
    }
    for (const key of affected) this.enqueue(key);
  }

  private onSlice(event: StoreEvent): void {
    const slice = event.object;
    const before = event.previous;
    if (slice.metadata.namespace === 'default' && slice.metadata.name === 'kubernetes' && this.apiServer && !this.writing) {
      this.enqueue(kubernetesQueueKey);
    }
    const touched = new Set<string>();
    if (before && this.isManaged(before)) touched.add(this.unindexSlice(before));
    if (this.isManaged(slice)) {
      touched.add(this.unindexSlice(slice));
      if (event.type !== 'DELETED') this.indexSlice(slice);
    }
    // Someone else changed or deleted a slice the controller keeps: put it back as it should be.
    if (!this.writing) for (const key of touched) this.enqueue(key);
  }

  // --- indexes ----------------------------------------------------------------------------------------

  private indexService(service: KubeObject): void {
    const key = keyOf(service.metadata.namespace, service.metadata.name);
    this.services.set(key, service);
    const selector = selectorOf(service);
    if (!selector) return;
    const namespace = service.metadata.namespace ?? '';
    let index = this.servicesBySelector.get(namespace);
    if (!index) this.servicesBySelector.set(namespace, (index = new Map()));
    for (const pair of Object.entries(selector).map(([label, value]) => labelPair(label, value))) {
      let names = index.get(pair);
      if (!names) index.set(pair, (names = new Set()));
      names.add(service.metadata.name ?? '');
    }
  }

  private unindexService(key: string): void {
    const service = this.services.get(key);
    if (!service) return;
    this.services.delete(key);
    const index = this.servicesBySelector.get(service.metadata.namespace ?? '');
    const selector = selectorOf(service);
    if (!index || !selector) return;
    for (const pair of Object.entries(selector).map(([label, value]) => labelPair(label, value))) {
      const names = index.get(pair);
      names?.delete(service.metadata.name ?? '');
      if (names?.size === 0) index.delete(pair);
    }
  }

  private indexPod(pod: KubeObject): void {
    const namespace = pod.metadata.namespace ?? '';
    const name = pod.metadata.name ?? '';
    const before = this.pods.get(namespace)?.get(name);
    if (before && (!isDeepStrictEqual(before.metadata.labels, pod.metadata.labels) || specOf(before).nodeName !== specOf(pod).nodeName)) {
      this.unindexPod(namespace, name);
    }
    let byName = this.pods.get(namespace);
    if (!byName) this.pods.set(namespace, (byName = new Map()));
    byName.set(name, pod);
    let byLabel = this.podsByLabel.get(namespace);
    if (!byLabel) this.podsByLabel.set(namespace, (byLabel = new Map()));
    for (const [label, value] of Object.entries(pod.metadata.labels ?? {})) {
      let names = byLabel.get(labelPair(label, value));
      if (!names) byLabel.set(labelPair(label, value), (names = new Set()));
      names.add(name);
    }
    const nodeName = specOf(pod).nodeName;
    if (typeof nodeName === 'string' && nodeName !== '') {
      let onNode = this.podsByNode.get(nodeName);
      if (!onNode) this.podsByNode.set(nodeName, (onNode = new Set()));
      onNode.add(keyOf(namespace, name));
    }
  }

  private unindexPod(namespace: string, name: string): void {
    const pod = this.pods.get(namespace)?.get(name);
    if (!pod) return;
    this.pods.get(namespace)?.delete(name);
    const byLabel = this.podsByLabel.get(namespace);
    for (const [label, value] of Object.entries(pod.metadata.labels ?? {})) {
      const names = byLabel?.get(labelPair(label, value));
      names?.delete(name);
      if (names?.size === 0) byLabel?.delete(labelPair(label, value));
    }
    const nodeName = specOf(pod).nodeName;
    if (typeof nodeName === 'string') {
      const onNode = this.podsByNode.get(nodeName);
      onNode?.delete(keyOf(namespace, name));
      if (onNode?.size === 0) this.podsByNode.delete(nodeName);
    }
  }

  private isManaged(slice: KubeObject): boolean {
    return slice.metadata.labels?.[LABEL_MANAGED_BY] === ENDPOINTSLICE_CONTROLLER_NAME && Boolean(slice.metadata.labels?.[LABEL_SERVICE_NAME]);
  }

  private sliceServiceKey(slice: KubeObject): string {
    return keyOf(slice.metadata.namespace, slice.metadata.labels?.[LABEL_SERVICE_NAME]);
  }

  private indexSlice(slice: KubeObject): void {
    if (!this.isManaged(slice)) return;
    const key = this.sliceServiceKey(slice);
    let byName = this.slices.get(key);
    if (!byName) this.slices.set(key, (byName = new Map()));
    byName.set(slice.metadata.name ?? '', slice);
    this.sliceOwners.set(keyOf(slice.metadata.namespace, slice.metadata.name), key);
  }

  /** Removes the slice from the Service it is filed under; returns the key of the Service its labels name now. */
  private unindexSlice(slice: KubeObject): string {
    const sliceKey = keyOf(slice.metadata.namespace, slice.metadata.name);
    const filedUnder = this.sliceOwners.get(sliceKey);
    if (filedUnder !== undefined) {
      this.sliceOwners.delete(sliceKey);
      const byName = this.slices.get(filedUnder);
      byName?.delete(slice.metadata.name ?? '');
      if (byName?.size === 0) this.slices.delete(filedUnder);
    }
    const key = this.sliceServiceKey(slice);
    // Its service-name label changed: the Service it left needs a sync too.
    if (filedUnder !== undefined && filedUnder !== key && !this.writing) this.enqueue(filedUnder);
    return key;
  }

  /** Adds to `into` the Services of the namespace whose selector these labels match. */
  private servicesSelecting(namespace: string, labels: Record<string, string> | undefined, into: Set<string>): void {
    const index = this.servicesBySelector.get(namespace);
    if (!index) return;
    const candidates = new Set<string>();
    for (const [label, value] of Object.entries(labels ?? {})) for (const name of index.get(labelPair(label, value)) ?? []) candidates.add(name);
    for (const name of candidates) {
      const key = keyOf(namespace, name);
      const selector = this.services.get(key) && selectorOf(this.services.get(key)!);
      if (selector && matches(selector, labels)) into.add(key);
    }
  }

  /** The pods of the namespace a selector matches, starting from its rarest label. */
  private podsSelectedBy(namespace: string, selector: Record<string, string>): KubeObject[] {
    const byName = this.pods.get(namespace);
    if (!byName) return [];
    const pairs = Object.entries(selector);
    const byLabel = this.podsByLabel.get(namespace);
    let smallest: Set<string> | undefined;
    for (const [label, value] of pairs) {
      const names = byLabel?.get(labelPair(label, value));
      if (!names) return [];
      if (!smallest || names.size < smallest.size) smallest = names;
    }
    const pods: KubeObject[] = [];
    for (const name of smallest ?? []) {
      const pod = byName.get(name);
      if (pod && matches(selector, pod.metadata.labels)) pods.push(pod);
    }
    return pods;
  }

  // --- the queue --------------------------------------------------------------------------------------

  private enqueue(key: string, since = Date.now()): void {
    if (this.stopped) return;
    if (!this.pending.has(key)) this.pending.set(key, since);
    this.turn ??= setImmediate(() => this.runTurn());
  }

  /** Syncs queued keys until the turn's budget is spent, then yields to the event loop. */
  private runTurn(): void {
    this.turn = undefined;
    const deadline = performance.now() + turnBudgetMs;
    for (const [key, since] of this.pending) {
      this.pending.delete(key);
      this.syncWithRetry(key, since);
      if (performance.now() >= deadline) break;
    }
    if (this.pending.size > 0 && !this.stopped) this.turn = setImmediate(() => this.runTurn());
  }

  private syncWithRetry(key: string, since: number): void {
    clearTimeout(this.retryTimers.get(key));
    this.retryTimers.delete(key);
    try {
      if (key === kubernetesQueueKey) this.syncKubernetesService();
      else this.syncService(key, since);
      this.attempts.delete(key);
    } catch (error) {
      const attempts = (this.attempts.get(key) ?? 0) + 1;
      this.attempts.set(key, attempts);
      if (attempts === 1) this.recordFailure(key, error instanceof Error ? error : new Error(String(error)));
      // Out of retries, the key is dropped and forgotten (as client-go's queue does): its next change starts afresh.
      if (attempts > maxRetries) this.attempts.delete(key);
      if (attempts > maxRetries || this.stopped) return;
      const timer = setTimeout(
        () => {
          this.retryTimers.delete(key);
          this.enqueue(key, since);
        },
        Math.min(retryBaseMs * 2 ** (attempts - 1), retryMaxMs),
      );
      this.retryTimers.set(key, timer);
    }
  }

  /** A Warning Event on the Service, as kube-controller-manager records one, once per run of failures. */
  private recordFailure(key: string, error: Error): void {
    const service = this.services.get(key);
    if (!service) return;
    const now = new Date().toISOString();
    try {
      this.store.create(this.resources.events, {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { generateName: `${service.metadata.name ?? ''}.`, namespace: service.metadata.namespace },
        involvedObject: {
          apiVersion: 'v1',
          kind: 'Service',
          namespace: service.metadata.namespace,
          name: service.metadata.name,
          uid: service.metadata.uid,
          resourceVersion: service.metadata.resourceVersion,
        },
        type: 'Warning',
        reason: 'FailedToUpdateEndpointSlices',
        message: `Error updating Endpoint Slices for Service ${key}: ${error.message}`,
        source: { component: 'endpoint-slice-controller' },
        reportingComponent: 'endpoint-slice-controller',
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      });
    } catch {
      // The Event is a courtesy: the failure is retried either way.
    }
  }

  // --- syncs ------------------------------------------------------------------------------------------

  private syncService(key: string, since: number): void {
    const service = this.services.get(key);
    const existing = [...(this.slices.get(key)?.values() ?? [])];
    const selector = service && selectorOf(service);
    if (!service || !selector) {
      // No garbage collector runs here to follow the ownerReferences: the controller removes its own slices of a
      // Service that went, or that no longer selects pods. Slices others wrote for a Service are theirs.
      this.write(() => existing.map((slice) => () => this.deleteSlice(slice)));
      return;
    }
    const plan = reconcileEndpointSlices({
      service,
      pods: this.podsSelectedBy(service.metadata.namespace ?? '', selector),
      node: (name) => this.nodes.get(name),
      existing,
      maxEndpointsPerSlice: this.options.maxEndpointsPerSlice,
      triggerTime: new Date(since),
    });
    this.write(() => [
      ...plan.create.map((slice) => () => void this.store.create(this.resources.slices, slice)),
      ...plan.update.map((slice) => () => void this.store.update(this.resources.slices, slice)),
      ...plan.delete.map((slice) => () => this.deleteSlice(slice)),
    ]);
  }

  /** Runs every write, even after one fails, and throws their errors together. */
  private write(steps: () => (() => void)[]): void {
    const errors: unknown[] = [];
    this.writing = true;
    try {
      for (const step of steps()) {
        try {
          step();
        } catch (error) {
          errors.push(error);
        }
      }
    } finally {
      this.writing = false;
    }
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new AggregateError(errors, errors.map(String).join('; '));
  }

  private deleteSlice(slice: KubeObject): void {
    try {
      this.store.delete(this.resources.slices, slice.metadata.namespace, slice.metadata.name ?? '');
    } catch (error) {
      if (!(error instanceof ApiError && error.code === 404)) throw error;
    }
  }

  /**
   * kube-apiserver's own: the `kubernetes` Service in `default` (the first address of the service CIDR, port 443 to
   * the server's port) and its EndpointSlice `kubernetes` naming the server's address. Recreated when deleted.
   */
  private syncKubernetesService(): void {
    if (!this.apiServer) return;
    const { address, port, serviceCidr } = this.apiServer;
    const clusterIp = firstHostOf(serviceCidr);
    const service = this.store.tryGet(this.resources.services, 'default', 'kubernetes');
    const desiredSlice: KubeObject = {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'kubernetes', namespace: 'default', labels: { [LABEL_SERVICE_NAME]: 'kubernetes' } },
      addressType: ipFamilyOf(address) ?? 'IPv4',
      endpoints: [{ addresses: [address], conditions: { ready: true } }],
      ports: [{ name: 'https', port, protocol: 'TCP' }],
    };
    const slice = this.store.tryGet(this.resources.slices, 'default', 'kubernetes');
    this.write(() => [
      () => {
        if (service) return;
        this.store.create(this.resources.services, {
          apiVersion: 'v1',
          kind: 'Service',
          metadata: { name: 'kubernetes', namespace: 'default', labels: { component: 'apiserver', provider: 'kubernetes' } },
          spec: {
            type: 'ClusterIP',
            clusterIP: clusterIp,
            clusterIPs: [clusterIp],
            ipFamilies: [ipFamilyOf(clusterIp)],
            ipFamilyPolicy: 'SingleStack',
            sessionAffinity: 'None',
            ports: [{ name: 'https', port: 443, protocol: 'TCP', targetPort: port }],
          },
        });
      },
      () => {
        if (!slice) {
          this.store.create(this.resources.slices, desiredSlice);
          return;
        }
        const same = (['addressType', 'endpoints', 'ports'] as const).every((field) => isDeepStrictEqual(slice[field], desiredSlice[field]));
        if (same && isDeepStrictEqual(slice.metadata.labels, desiredSlice.metadata.labels)) return;
        this.store.update(this.resources.slices, { ...desiredSlice, metadata: { ...slice.metadata, labels: desiredSlice.metadata.labels } });
      },
    ]);
  }
}

/**
 * Starts the controller for a server listening on `host` and `port`: the `kubernetes` Service points at the advertised
 * address (the host when it is a specific address, else 127.0.0.1) and takes the first address of the first service CIDR.
 */
export function startEndpointSliceController(
  store: ObjectStore,
  registry: ResourceRegistry,
  server: { host?: string; port: number; serviceCidrs?: readonly string[] },
  option: true | EndpointSliceControllerOptions,
): EndpointSliceController {
  const settings = option === true ? {} : option;
  const host = server.host ?? '127.0.0.1';
  const specific = ipFamilyOf(host) !== undefined && ipaddr.parse(host).range() !== 'unspecified';
  const address = settings.advertiseAddress ?? (specific ? host : '127.0.0.1');
  if (ipFamilyOf(address) === undefined) throw new Error(`endpointSliceController.advertiseAddress must be an IP address, not ${address}`);
  const serviceCidr = server.serviceCidrs?.[0] ?? '10.96.0.0/12';
  const controller = new EndpointSliceController(store, registry, settings, { address, port: server.port, serviceCidr });
  controller.start();
  return controller;
}
