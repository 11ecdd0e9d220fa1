// kube-controller-manager's EndpointSlice reconciler (k8s.io/endpointslice reconciler.go, utils.go,
// trafficdist/trafficdist.go), as a pure function: a Service, the pods its selector picks, the Nodes and the slices the
// controller already keeps go in; the slices to create, update and delete come out. No I/O: the controller writes.
import { isDeepStrictEqual } from 'node:util';
import ipaddr from 'ipaddr.js';
import type { KubeObject } from './kube-object.js';
import { isPlainObject } from './kube-object.js';
import { ipFamilyOf } from './store/ip-address.js';

export const ENDPOINTSLICE_CONTROLLER_NAME = 'endpointslice-controller.k8s.io';
export const LABEL_SERVICE_NAME = 'kubernetes.io/service-name';
export const LABEL_MANAGED_BY = 'endpointslice.kubernetes.io/managed-by';
export const LABEL_HEADLESS = 'service.kubernetes.io/headless';
export const LABEL_TOPOLOGY_ZONE = 'topology.kubernetes.io/zone';
export const ANNOTATION_TRIGGER_TIME = 'endpoints.kubernetes.io/last-change-trigger-time';
/** kube-controller-manager's --max-endpoints-per-slice default. */
export const DEFAULT_MAX_ENDPOINTS_PER_SLICE = 100;

type AddressType = 'IPv4' | 'IPv6';
type Json = Record<string, unknown>;

export interface EndpointPort {
  name: string;
  port: number;
  protocol: string;
  appProtocol?: string;
}

export interface Endpoint {
  addresses: string[];
  conditions: { ready: boolean; serving: boolean; terminating: boolean };
  hostname?: string;
  nodeName?: string;
  zone?: string;
  targetRef?: { kind: string; namespace: string; name: string; uid: string };
  hints?: { forZones?: { name: string }[]; forNodes?: { name: string }[] };
}

/** An EndpointSlice as this module reads and writes it (the stored object, with these fields typed). */
export interface EndpointSliceObject extends KubeObject {
  addressType: string;
  endpoints: Endpoint[];
  ports: EndpointPort[];
}

export interface ReconcileInput {
  service: KubeObject;
  /** The pods of the Service's namespace that its selector matches. */
  pods: readonly KubeObject[];
  node(name: string): KubeObject | undefined;
  /** The slices that carry this Service's name and the controller's managed-by label. */
  existing: readonly KubeObject[];
  maxEndpointsPerSlice?: number;
  /** The earliest change not yet reflected in the slices; written as the last-change-trigger-time annotation. */
  triggerTime?: Date;
}

export interface ReconcilePlan {
  /** New slices: `metadata.generateName` set, no name. */
  create: EndpointSliceObject[];
  /** Existing slices with their new content; `metadata.resourceVersion` is the one read. */
  update: EndpointSliceObject[];
  delete: KubeObject[];
  /** Pods left out because their Node does not exist (kube-controller-manager retries the Service for them). */
  podsWithoutNode: string[];
}

const spec = (obj: KubeObject): Json => (isPlainObject(obj.spec) ? obj.spec : {});
const status = (obj: KubeObject): Json => (isPlainObject(obj.status) ? obj.status : {});
const list = (value: unknown): Json[] => (Array.isArray(value) ? value.filter(isPlainObject) : []);
const stringOr = (value: unknown, fallback = ''): string => (typeof value === 'string' ? value : fallback);

/** The address types of a Service's ipFamilies, or as getAddressTypesForService guesses them without. */
export function addressTypesOf(service: KubeObject): AddressType[] {
  const families = Array.isArray(spec(service).ipFamilies) ? (spec(service).ipFamilies as unknown[]) : [];
  const types = [...new Set(families.filter((family): family is AddressType => family === 'IPv4' || family === 'IPv6'))];
  if (types.length > 0) return types;
  const clusterIp = stringOr(spec(service).clusterIP);
  if (clusterIp !== '' && clusterIp !== 'None') return [ipFamilyOf(clusterIp) === 'IPv6' ? 'IPv6' : 'IPv4'];
  return ['IPv4', 'IPv6'];
}

export function isPodReady(pod: KubeObject): boolean {
  return list(status(pod).conditions).some((condition) => condition.type === 'Ready' && condition.status === 'True');
}

function podIps(pod: KubeObject): string[] {
  const ips = list(status(pod).podIPs).map((entry) => stringOr(entry.ip));
  // podIPs is what kube-apiserver keeps in step with podIP; a pod written with podIP alone still has its address.
  const all = ips.length > 0 ? ips : [stringOr(status(pod).podIP)];
  return all.filter((ip) => ipFamilyOf(ip) !== undefined);
}

/** ShouldPodBeInEndpoints(pod, includeTerminating=true): not Succeeded or Failed, and has an address. */
export function shouldPodBeInEndpoints(pod: KubeObject): boolean {
  const phase = status(pod).phase;
  return phase !== 'Succeeded' && phase !== 'Failed' && podIps(pod).length > 0;
}

/**
 * FindPort: a numeric targetPort is itself; a named one is the container port of that name and the Service port's
 * protocol, in the containers or the sidecars (init containers that always restart). Undefined when the pod has none.
 */
export function findPort(pod: KubeObject, servicePort: Json): number | undefined {
  const target = servicePort.targetPort ?? servicePort.port;
  if (typeof target === 'number') return target;
  if (typeof target !== 'string') return undefined;
  const protocol = stringOr(servicePort.protocol, 'TCP');
  const containers = [
    ...list(spec(pod).containers),
    ...list(spec(pod).initContainers).filter((container) => container.restartPolicy === 'Always'),
  ];
  for (const container of containers) {
    for (const port of list(container.ports)) {
      if (port.name === target && stringOr(port.protocol, 'TCP') === protocol && typeof port.containerPort === 'number') return port.containerPort;
    }
  }
  return undefined;
}

/** getEndpointPorts: one port per Service port that resolves on this pod, in the Service's order. */
export function endpointPortsOf(service: KubeObject, pod: KubeObject): EndpointPort[] {
  const ports: EndpointPort[] = [];
  for (const servicePort of list(spec(service).ports)) {
    const port = findPort(pod, servicePort);
    if (port === undefined) continue;
    ports.push({
      name: stringOr(servicePort.name),
      port,
      protocol: stringOr(servicePort.protocol, 'TCP'),
      ...(typeof servicePort.appProtocol === 'string' && { appProtocol: servicePort.appProtocol }),
    });
  }
  return ports;
}

/** podToEndpoint: the pod's addresses of one family and its conditions, node, zone and reference. */
export function podToEndpoint(pod: KubeObject, node: KubeObject | undefined, service: KubeObject, addressType: AddressType): Endpoint {
  const serving = isPodReady(pod);
  const terminating = pod.metadata.deletionTimestamp !== undefined && pod.metadata.deletionTimestamp !== null;
  // As upstream: never ready while terminating, unless the Service publishes not-ready addresses.
  const ready = spec(service).publishNotReadyAddresses === true || (serving && !terminating);
  const addresses = podIps(pod)
    .filter((ip) => ipFamilyOf(ip) === addressType)
    // Re-written in canonical form, as upstream re-stringifies each address.
    .map((ip) => (addressType === 'IPv6' ? ipaddr.IPv6.parse(ip).toRFC5952String() : ip));
  const endpoint: Endpoint = {
    addresses,
    conditions: { ready, serving, terminating },
    targetRef: { kind: 'Pod', namespace: stringOr(pod.metadata.namespace), name: stringOr(pod.metadata.name), uid: stringOr(pod.metadata.uid) },
  };
  const nodeName = stringOr(spec(pod).nodeName);
  if (nodeName !== '') endpoint.nodeName = nodeName;
  const zone = node?.metadata.labels?.[LABEL_TOPOLOGY_ZONE];
  if (zone) endpoint.zone = zone;
  const hostname = stringOr(spec(pod).hostname);
  if (hostname !== '' && spec(pod).subdomain === service.metadata.name && pod.metadata.namespace === service.metadata.namespace) {
    endpoint.hostname = hostname;
  }
  return endpoint;
}

/** What identifies an endpoint across syncs (hashEndpoint): its addresses, hostname and pod. */
function endpointKey(endpoint: Endpoint): string {
  return JSON.stringify([[...endpoint.addresses].sort(), endpoint.hostname ?? '', endpoint.targetRef?.namespace ?? '', endpoint.targetRef?.name ?? '']);
}

/** The ports of a slice as a key that ignores their order (NewPortMapKey). */
function portMapKey(ports: readonly EndpointPort[]): string {
  return JSON.stringify(
    ports.map((port) => [port.name ?? '', port.port ?? 0, port.protocol ?? 'TCP', port.appProtocol ?? '']).sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1)),
  );
}

/** EndpointsEqualBeyondHash: node, zone, conditions and the pod reference (hints are reconciled afterwards). */
function endpointsEqualBeyondHash(a: Endpoint, b: Endpoint): boolean {
  const ref = (endpoint: Endpoint) => {
    if (!endpoint.targetRef) return undefined;
    const { resourceVersion: _ignored, ...rest } = endpoint.targetRef as Endpoint['targetRef'] & { resourceVersion?: string };
    return rest;
  };
  return (
    a.nodeName === b.nodeName &&
    a.zone === b.zone &&
    a.conditions?.ready === b.conditions?.ready &&
    a.conditions?.serving === b.conditions?.serving &&
    a.conditions?.terminating === b.conditions?.terminating &&
    isDeepStrictEqual(ref(a), ref(b))
  );
}

function reservedLabel(key: string): boolean {
  return key === LABEL_SERVICE_NAME || key === LABEL_MANAGED_BY || key === LABEL_HEADLESS;
}

function withoutReserved(labels: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(labels ?? {}).filter(([key]) => !reservedLabel(key)));
}

/** setEndpointSliceLabels: the Service's labels, the headless label, the Service's name and the controller's. */
function sliceLabels(slice: KubeObject | undefined, service: KubeObject): { labels: Record<string, string>; changed: boolean } {
  const serviceLabels = withoutReserved(service.metadata.labels);
  const changed = slice !== undefined && !isDeepStrictEqual(withoutReserved(slice.metadata.labels), serviceLabels);
  const clusterIp = stringOr(spec(service).clusterIP);
  return {
    labels: {
      ...serviceLabels,
      ...(clusterIp === 'None' || clusterIp === '' ? { [LABEL_HEADLESS]: '' } : {}),
      [LABEL_SERVICE_NAME]: stringOr(service.metadata.name),
      [LABEL_MANAGED_BY]: ENDPOINTSLICE_CONTROLLER_NAME,
    },
    changed,
  };
}

function ownedBy(slice: KubeObject, service: KubeObject): boolean {
  return list(slice.metadata.ownerReferences).some((ref) => ref.uid === service.metadata.uid && ref.kind === 'Service' && ref.apiVersion === 'v1');
}

/** getEndpointSlicePrefix: `<service>-`, unless that is no valid name (then the Service's name). */
function slicePrefix(serviceName: string): string {
  return serviceName.length + 1 <= 253 - 5 ? `${serviceName}-` : serviceName;
}

function newSlice(service: KubeObject, ports: EndpointPort[], addressType: AddressType): EndpointSliceObject {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      generateName: slicePrefix(stringOr(service.metadata.name)),
      namespace: service.metadata.namespace,
      labels: sliceLabels(undefined, service).labels,
      ownerReferences: [
        { apiVersion: 'v1', kind: 'Service', name: service.metadata.name, uid: service.metadata.uid, controller: true, blockOwnerDeletion: true },
      ],
    },
    addressType,
    endpoints: [],
    ports,
  };
}

function asSlice(obj: KubeObject): EndpointSliceObject {
  const copy = structuredClone(obj) as EndpointSliceObject;
  copy.endpoints = Array.isArray(copy.endpoints) ? copy.endpoints : [];
  copy.ports = Array.isArray(copy.ports) ? copy.ports : [];
  return copy;
}

/** trafficDistribution values this controller honours (PreferSameTrafficDistribution is on, as in 1.35). */
function hintMode(service: KubeObject): 'none' | 'zone' | 'node' {
  const annotations = service.metadata.annotations ?? {};
  const topologyMode = annotations['service.kubernetes.io/topology-aware-hints'] ?? annotations['service.kubernetes.io/topology-mode'];
  // The topology annotation wins over trafficDistribution; without a topology cache it means no hints.
  if (topologyMode === 'Auto' || topologyMode === 'auto') return 'none';
  const distribution = spec(service).trafficDistribution;
  if (distribution === 'PreferClose' || distribution === 'PreferSameZone') return 'zone';
  if (distribution === 'PreferSameNode') return 'node';
  return 'none';
}

/** The hints an endpoint should carry (trafficdist's heuristics): only ready endpoints get any. */
function wantedHints(endpoint: Endpoint, mode: 'none' | 'zone' | 'node'): Endpoint['hints'] {
  if (mode === 'none') return undefined;
  const forZones = endpoint.zone !== undefined ? [{ name: endpoint.zone }] : undefined;
  const forNodes = mode === 'node' && endpoint.nodeName !== undefined ? [{ name: endpoint.nodeName }] : undefined;
  return forZones || forNodes ? { ...(forZones && { forZones }), ...(forNodes && { forNodes }) } : undefined;
}

function needsHintUpdate(slice: EndpointSliceObject, mode: 'none' | 'zone' | 'node'): boolean {
  return slice.endpoints.some((endpoint) =>
    mode === 'none' ? endpoint.hints !== undefined : endpoint.conditions?.ready === true && !isDeepStrictEqual(endpoint.hints, wantedHints(endpoint, mode)),
  );
}

function applyHints(slice: EndpointSliceObject, mode: 'none' | 'zone' | 'node'): void {
  for (const endpoint of slice.endpoints) {
    if (mode !== 'none' && endpoint.conditions?.ready !== true) continue;
    const hints = wantedHints(endpoint, mode);
    if (hints) endpoint.hints = hints;
    else delete endpoint.hints;
  }
}

/** Whether a slice is the placeholder kube-controller-manager keeps for a Service without endpoints. */
function isPlaceholder(slice: KubeObject, placeholder: EndpointSliceObject): boolean {
  const endpoints = Array.isArray(slice.endpoints) ? slice.endpoints : [];
  const ports = Array.isArray(slice.ports) ? slice.ports : [];
  return (
    slice.metadata.namespace === placeholder.metadata.namespace &&
    isDeepStrictEqual(slice.metadata.labels ?? {}, placeholder.metadata.labels) &&
    slice.addressType === placeholder.addressType &&
    endpoints.length === 0 &&
    ports.length === 0
  );
}

interface AddressTypePlan {
  create: EndpointSliceObject[];
  update: EndpointSliceObject[];
  delete: KubeObject[];
}

/** Reconcile: one pass per address type of the Service; slices of a type it no longer has go. */
export function reconcileEndpointSlices(input: ReconcileInput): ReconcilePlan {
  const { service } = input;
  const maxEndpoints = input.maxEndpointsPerSlice ?? DEFAULT_MAX_ENDPOINTS_PER_SLICE;
  const types = addressTypesOf(service);
  const plan: ReconcilePlan = { create: [], update: [], delete: [], podsWithoutNode: [] };
  const byType = new Map<string, KubeObject[]>();
  for (const slice of input.existing) {
    const type = stringOr(slice.addressType);
    if (!types.includes(type as AddressType)) plan.delete.push(slice);
    else byType.set(type, [...(byType.get(type) ?? []), slice]);
  }
  const skipped = new Set<string>();
  for (const addressType of types) {
    const typePlan = reconcileAddressType(input, byType.get(addressType) ?? [], addressType, maxEndpoints, skipped);
    const finalized = finalize(service, typePlan);
    for (const slice of [...finalized.create, ...finalized.update]) setTriggerTime(slice, input.triggerTime);
    plan.create.push(...finalized.create);
    plan.update.push(...finalized.update);
    plan.delete.push(...finalized.delete);
  }
  plan.podsWithoutNode = [...skipped];
  return plan;
}

function setTriggerTime(slice: EndpointSliceObject, triggerTime: Date | undefined): void {
  const annotations = { ...slice.metadata.annotations };
  if (triggerTime) annotations[ANNOTATION_TRIGGER_TIME] = triggerTime.toISOString();
  else delete annotations[ANNOTATION_TRIGGER_TIME];
  if (Object.keys(annotations).length > 0) slice.metadata.annotations = annotations;
  else delete slice.metadata.annotations;
}

function reconcileAddressType(
  input: ReconcileInput,
  existing: readonly KubeObject[],
  addressType: AddressType,
  maxEndpoints: number,
  skipped: Set<string>,
): AddressTypePlan {
  const { service } = input;
  const plan: AddressTypePlan = { create: [], update: [], delete: [] };
  const existingByPorts = new Map<string, EndpointSliceObject[]>();
  for (const slice of existing) {
    if (!ownedBy(slice, service)) {
      plan.delete.push(slice);
      continue;
    }
    const typed = asSlice(slice);
    const key = portMapKey(typed.ports);
    existingByPorts.set(key, [...(existingByPorts.get(key) ?? []), typed]);
  }

  // The desired endpoints, grouped by the ports they resolve to: pods whose named ports differ land apart.
  const desired = new Map<string, { ports: EndpointPort[]; endpoints: Map<string, Endpoint> }>();
  const publishNotReady = spec(service).publishNotReadyAddresses === true;
  for (const pod of [...input.pods].sort((a, b) => stringOr(a.metadata.name).localeCompare(stringOr(b.metadata.name)))) {
    if (!shouldPodBeInEndpoints(pod)) continue;
    const ports = endpointPortsOf(service, pod);
    const key = portMapKey(ports);
    let group = desired.get(key);
    if (!group) desired.set(key, (group = { ports, endpoints: new Map() }));
    const nodeName = stringOr(spec(pod).nodeName);
    const node = input.node(nodeName);
    if (!node && !publishNotReady) {
      skipped.add(`${stringOr(pod.metadata.namespace)}/${stringOr(pod.metadata.name)}`);
      continue;
    }
    const endpoint = podToEndpoint(pod, node, service, addressType);
    if (endpoint.addresses.length > 0) group.endpoints.set(endpointKey(endpoint), endpoint);
  }

  const unchanged: EndpointSliceObject[] = [];
  for (const [key, group] of desired) {
    const result = reconcilePortMapping(service, existingByPorts.get(key) ?? [], group.endpoints, group.ports, addressType, maxEndpoints);
    plan.create.push(...result.create);
    plan.update.push(...result.update);
    plan.delete.push(...result.delete);
    unchanged.push(...result.unchanged);
  }
  for (const [key, slices] of existingByPorts) if (!desired.has(key)) plan.delete.push(...slices);

  // No endpoints at all: one placeholder slice stands for the Service (kept when it is there already).
  if (existing.length === plan.delete.length && plan.create.length === 0) {
    const placeholder = newSlice(service, [], addressType);
    const only = plan.delete.length === 1 ? plan.delete[0] : undefined;
    if (only && isPlaceholder(only, placeholder)) plan.delete = [];
    else plan.create.push(placeholder);
  }

  const mode = hintMode(service);
  for (const slice of unchanged) {
    if (needsHintUpdate(slice, mode)) plan.update.push(slice);
  }
  for (const slice of [...plan.create, ...plan.update]) applyHints(slice, mode);
  return plan;
}

/** reconcileByPortMapping: keep what exists, drop what went, update what changed, fill, then create. */
function reconcilePortMapping(
  service: KubeObject,
  existing: EndpointSliceObject[],
  desired: Map<string, Endpoint>,
  ports: EndpointPort[],
  addressType: AddressType,
  maxEndpoints: number,
): { create: EndpointSliceObject[]; update: EndpointSliceObject[]; delete: EndpointSliceObject[]; unchanged: EndpointSliceObject[] } {
  const toUpdate = new Map<string, EndpointSliceObject>();
  const toDelete: EndpointSliceObject[] = [];
  const unchanged = new Map<string, EndpointSliceObject>();
  for (const slice of existing) {
    const kept: Endpoint[] = [];
    let endpointUpdated = false;
    for (const endpoint of slice.endpoints) {
      const key = endpointKey(endpoint);
      const wanted = desired.get(key);
      if (!wanted) continue;
      kept.push(wanted);
      if (!endpointsEqualBeyondHash(wanted, endpoint)) endpointUpdated = true;
      desired.delete(key);
    }
    const { labels, changed: labelsChanged } = sliceLabels(slice, service);
    const name = stringOr(slice.metadata.name);
    if (endpointUpdated || kept.length !== slice.endpoints.length) {
      if (kept.length === 0) toDelete.push(slice);
      else toUpdate.set(name, { ...slice, metadata: { ...slice.metadata, labels }, endpoints: kept });
    } else if (labelsChanged) {
      toUpdate.set(name, { ...slice, metadata: { ...slice.metadata, labels } });
    } else {
      unchanged.set(name, slice);
    }
  }

  const remaining = [...desired.values()];
  // Fill the slices being updated anyway, fullest first.
  for (const slice of [...toUpdate.values()].sort((a, b) => b.endpoints.length - a.endpoints.length)) {
    while (remaining.length > 0 && slice.endpoints.length < maxEndpoints) slice.endpoints.push(remaining.shift()!);
  }
  const create: EndpointSliceObject[] = [];
  while (remaining.length > 0) {
    let target: EndpointSliceObject | undefined;
    if (remaining.length < maxEndpoints && unchanged.size > 0) {
      // getSliceToFill: the unchanged slice that would be closest to full.
      let closest = maxEndpoints;
      for (const slice of unchanged.values()) {
        const diff = maxEndpoints - (remaining.length + slice.endpoints.length);
        if (diff >= 0 && diff < closest) {
          closest = diff;
          target = slice;
        }
      }
    }
    if (target) {
      const name = stringOr(target.metadata.name);
      unchanged.delete(name);
      target = { ...target, endpoints: [...target.endpoints] };
      toUpdate.set(name, target);
    } else {
      target = newSlice(service, ports, addressType);
      create.push(target);
    }
    while (remaining.length > 0 && target.endpoints.length < maxEndpoints) target.endpoints.push(remaining.shift()!);
  }
  return { create, update: [...toUpdate.values()], delete: toDelete, unchanged: [...unchanged.values()] };
}

/** finalize: a slice to create becomes an update of an owned slice of its address type that was to be deleted. */
function finalize(service: KubeObject, plan: AddressTypePlan): AddressTypePlan {
  const create = [...plan.create];
  const update = [...plan.update];
  const remove: KubeObject[] = [];
  for (const slice of plan.delete) {
    const reuse = create.length > 0 && slice.addressType === create[create.length - 1]!.addressType && ownedBy(slice, service);
    if (!reuse) {
      remove.push(slice);
      continue;
    }
    const replacement = create.pop()!;
    const { generateName: _generated, ...metadata } = replacement.metadata;
    update.push({
      ...replacement,
      metadata: { ...slice.metadata, ...metadata, name: slice.metadata.name, resourceVersion: slice.metadata.resourceVersion },
    });
  }
  return { create, update, delete: remove };
}
