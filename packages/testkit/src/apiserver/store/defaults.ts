import type { StatusCause } from '../errors.js';
import type { KubeObject } from '../kube-object.js';
import { isPlainObject } from '../kube-object.js';
import type { IpFamily } from './ip-address.js';
import { ipFamilyOf } from './ip-address.js';
import { defaultRbacSubjects } from './rbac-validation.js';
import type { ServiceAddressAllocator } from './service-allocator.js';

/** What defaulting needs from the store: the addresses and ports existing Services already hold. */
export interface DefaultingContext {
  allocator: ServiceAddressAllocator;
  usedClusterIps(): Set<string>;
  usedNodePorts(): Set<number>;
}

type Json = Record<string, unknown>;

function objectsIn(value: unknown): Json[] {
  return Array.isArray(value) ? value.filter(isPlainObject) : [];
}

function defaultProtocols(ports: unknown): void {
  for (const port of objectsIn(ports)) port.protocol ??= 'TCP';
}

function defaultNamespace(obj: KubeObject): void {
  const name = obj.metadata.name as string;
  obj.metadata.labels = { ...obj.metadata.labels, 'kubernetes.io/metadata.name': name };
  const spec = isPlainObject(obj.spec) ? obj.spec : {};
  spec.finalizers ??= ['kubernetes'];
  obj.spec = spec;
  const status = isPlainObject(obj.status) ? obj.status : {};
  status.phase ??= 'Active';
  obj.status = status;
}

function defaultPod(obj: KubeObject): void {
  const spec = isPlainObject(obj.spec) ? obj.spec : {};
  for (const list of ['containers', 'initContainers']) {
    for (const container of objectsIn(spec[list])) defaultProtocols(container.ports);
  }
  obj.status ??= { phase: 'Pending' };
}

function defaultNetworkPolicy(obj: KubeObject): void {
  const spec = isPlainObject(obj.spec) ? obj.spec : {};
  for (const direction of ['ingress', 'egress']) {
    for (const rule of objectsIn(spec[direction])) defaultProtocols(rule.ports);
  }
  spec.policyTypes ??= spec.egress === undefined ? ['Ingress'] : ['Ingress', 'Egress'];
  obj.spec = spec;
}

function defaultEndpointSlice(obj: KubeObject): void {
  defaultProtocols(obj.ports);
}

function serviceFamilies(spec: Json, allocator: ServiceAddressAllocator): IpFamily[] {
  const requested = Array.isArray(spec.clusterIPs) ? spec.clusterIPs : spec.clusterIP ? [spec.clusterIP] : [];
  const fromAddresses = requested
    .filter((ip): ip is string => typeof ip === 'string')
    .map(ipFamilyOf)
    .filter((family): family is IpFamily => family !== undefined);
  if (fromAddresses.length > 0) return fromAddresses;
  const declared = Array.isArray(spec.ipFamilies) ? (spec.ipFamilies as IpFamily[]) : [];
  const primary = declared[0] ?? (allocator.hasFamily('IPv4') ? 'IPv4' : 'IPv6');
  const policy = spec.ipFamilyPolicy ?? 'SingleStack';
  if (policy === 'SingleStack') return [primary];
  const secondary = declared[1] ?? (primary === 'IPv4' ? 'IPv6' : 'IPv4');
  return allocator.hasFamily(secondary) ? [primary, secondary] : [primary];
}

function defaultService(obj: KubeObject, context: DefaultingContext): StatusCause[] {
  const spec = isPlainObject(obj.spec) ? obj.spec : {};
  obj.spec = spec;
  spec.type ??= 'ClusterIP';
  spec.sessionAffinity ??= 'None';
  const ports = objectsIn(spec.ports);
  for (const port of ports) {
    port.protocol ??= 'TCP';
    if (port.targetPort === undefined || port.targetPort === 0 || port.targetPort === '') port.targetPort = port.port;
  }
  obj.status ??= { loadBalancer: {} };
  if (spec.type === 'ExternalName') return [];
  spec.internalTrafficPolicy ??= 'Cluster';

  const causes: StatusCause[] = [];
  if (spec.clusterIP === 'None') {
    spec.clusterIPs ??= ['None'];
    spec.ipFamilies ??= [context.allocator.hasFamily('IPv4') ? 'IPv4' : 'IPv6'];
    spec.ipFamilyPolicy ??= 'SingleStack';
  } else {
    const families = serviceFamilies(spec, context.allocator);
    const used = context.usedClusterIps();
    const requested = (Array.isArray(spec.clusterIPs) ? spec.clusterIPs : spec.clusterIP ? [spec.clusterIP] : []) as string[];
    const clusterIps = families.map((family, index) => {
      const ip = requested[index];
      if (ip === undefined) return context.allocator.allocateClusterIp(family, used);
      if (ipFamilyOf(ip) === undefined) {
        causes.push({ reason: 'FieldValueInvalid', field: 'spec.clusterIPs', message: `Invalid value: "${ip}": must be a valid IP address` });
      } else if (used.has(ip)) {
        causes.push({ reason: 'FieldValueInvalid', field: 'spec.clusterIPs', message: `Invalid value: "${ip}": provided IP is already allocated` });
      }
      return ip;
    });
    if (clusterIps.some((ip) => ip === undefined)) {
      causes.push({ reason: 'FieldValueInvalid', field: 'spec.clusterIPs', message: 'Internal error: the service IP range is full' });
    }
    spec.clusterIPs = clusterIps;
    spec.clusterIP = clusterIps[0];
    spec.ipFamilies = families;
    spec.ipFamilyPolicy ??= 'SingleStack';
  }

  if (spec.type === 'NodePort' || spec.type === 'LoadBalancer') {
    spec.externalTrafficPolicy ??= 'Cluster';
    const usedPorts = context.usedNodePorts();
    for (const port of ports) {
      if (typeof port.nodePort === 'number') {
        if (usedPorts.has(port.nodePort)) {
          causes.push({ reason: 'FieldValueInvalid', field: 'spec.ports.nodePort', message: `Invalid value: ${port.nodePort}: provided port is already allocated` });
        }
      } else {
        port.nodePort = context.allocator.allocateNodePort(usedPorts);
      }
      usedPorts.add(port.nodePort as number);
    }
  }
  return causes;
}

/**
 * Fills in the defaults a real API server adds on create, so that code tested here meets the objects it
 * will meet in a cluster (namespace name labels, protocols, policyTypes, Service cluster IPs and node ports).
 * Returns validation failures found on the way.
 */
export function applyCreateDefaults(obj: KubeObject, context: DefaultingContext): StatusCause[] {
  switch (`${obj.apiVersion}/${obj.kind}`) {
    case 'v1/Namespace':
      defaultNamespace(obj);
      return [];
    case 'v1/Pod':
      defaultPod(obj);
      return [];
    case 'v1/Service':
      return defaultService(obj, context);
    case 'networking.k8s.io/v1/NetworkPolicy':
      defaultNetworkPolicy(obj);
      return [];
    case 'discovery.k8s.io/v1/EndpointSlice':
      defaultEndpointSlice(obj);
      return [];
    case 'rbac.authorization.k8s.io/v1/ClusterRoleBinding':
    case 'rbac.authorization.k8s.io/v1/RoleBinding':
      defaultRbacSubjects(obj);
      return [];
    default:
      return [];
  }
}

/** Defaults that also apply when an update rewrites the object. */
export function applyUpdateDefaults(obj: KubeObject, previous: KubeObject): void {
  switch (`${obj.apiVersion}/${obj.kind}`) {
    case 'v1/Namespace':
      obj.metadata.labels = { ...obj.metadata.labels, 'kubernetes.io/metadata.name': obj.metadata.name as string };
      break;
    case 'v1/Service': {
      // Allocated addresses stay with the Service when an update (kubectl apply, a PUT) leaves them out.
      const spec = isPlainObject(obj.spec) ? obj.spec : {};
      const before = isPlainObject(previous.spec) ? previous.spec : {};
      for (const field of ['clusterIP', 'clusterIPs', 'ipFamilies', 'ipFamilyPolicy', 'type', 'sessionAffinity', 'internalTrafficPolicy']) {
        if (spec[field] === undefined && before[field] !== undefined) spec[field] = before[field];
      }
      for (const port of objectsIn(spec.ports)) {
        port.protocol ??= 'TCP';
        if (port.targetPort === undefined || port.targetPort === 0 || port.targetPort === '') port.targetPort = port.port;
      }
      obj.spec = spec;
      break;
    }
    case 'networking.k8s.io/v1/NetworkPolicy':
      defaultNetworkPolicy(obj);
      break;
    case 'discovery.k8s.io/v1/EndpointSlice':
      defaultEndpointSlice(obj);
      break;
    case 'rbac.authorization.k8s.io/v1/ClusterRoleBinding':
    case 'rbac.authorization.k8s.io/v1/RoleBinding':
      defaultRbacSubjects(obj);
      break;
  }
}
