import type { StatusCause } from '../errors.js';
import type { KubeObject } from '../kube-object.js';
import { isPlainObject } from '../kube-object.js';
import type { IpFamily } from './ip-address.js';
import { ipFamilyOf } from './ip-address.js';
import { rbacCausesByKind } from './rbac-validation.js';
import { nodePortRange } from './service-allocator.js';

/**
 * The checks kube-apiserver's validation makes that the OpenAPI schemas cannot say: port numbers, IP addresses and
 * duplicate Node addresses.
 * Code tested against this server must meet the refusals it would meet in a cluster, not store what none would.
 * Values of the wrong JSON type are the schema's to refuse; these checks skip them.
 */

type Json = Record<string, unknown>;

function objectsAt(value: unknown): [Json, number][] {
  return Array.isArray(value) ? value.flatMap((item, index) => (isPlainObject(item) ? [[item, index] as [Json, number]] : [])) : [];
}

function portCauses(field: string, value: unknown, zeroMeansUnset = false): StatusCause[] {
  if (typeof value !== 'number' || (zeroMeansUnset && value === 0)) return [];
  if (Number.isInteger(value) && value >= 1 && value <= 65535) return [];
  return [{ reason: 'FieldValueInvalid', field, message: `Invalid value: ${value}: must be between 1 and 65535, inclusive` }];
}

function ipCauses(field: string, value: unknown, family?: IpFamily): StatusCause[] {
  if (typeof value !== 'string') return [];
  const actual = ipFamilyOf(value);
  if (actual !== undefined && (family === undefined || family === actual)) return [];
  const rule = family === undefined ? 'a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)' : `a valid ${family} address`;
  return [{ reason: 'FieldValueInvalid', field, message: `Invalid value: "${value}": must be ${rule}` }];
}

function ipListCauses(field: string, value: unknown, family?: IpFamily): StatusCause[] {
  return Array.isArray(value) ? value.flatMap((item, index) => ipCauses(`${field}[${index}]`, item, family)) : [];
}

function serviceCauses(obj: KubeObject): StatusCause[] {
  const spec = isPlainObject(obj.spec) ? obj.spec : {};
  const status = isPlainObject(obj.status) ? obj.status : {};
  const loadBalancer = isPlainObject(status.loadBalancer) ? status.loadBalancer : {};
  // "None" marks a headless Service and "" asks for an allocation; neither is an address.
  const assigned = (value: unknown) => value !== 'None' && value !== '';
  const causes = [
    ...(assigned(spec.clusterIP) ? ipCauses('spec.clusterIP', spec.clusterIP) : []),
    ...(Array.isArray(spec.clusterIPs) ? spec.clusterIPs.flatMap((ip, i) => (assigned(ip) ? ipCauses(`spec.clusterIPs[${i}]`, ip) : [])) : []),
    ...ipListCauses('spec.externalIPs', spec.externalIPs),
    ...(assigned(spec.loadBalancerIP) ? ipCauses('spec.loadBalancerIP', spec.loadBalancerIP) : []),
    ...objectsAt(loadBalancer.ingress).flatMap(([ingress, i]) => ipCauses(`status.loadBalancer.ingress[${i}].ip`, ingress.ip)),
  ];
  for (const [port, i] of objectsAt(spec.ports)) {
    causes.push(...portCauses(`spec.ports[${i}].port`, port.port));
    // A targetPort of 0 is unset: defaulting makes it the port.
    causes.push(...portCauses(`spec.ports[${i}].targetPort`, port.targetPort, true));
    const nodePort = portCauses(`spec.ports[${i}].nodePort`, port.nodePort, true);
    causes.push(...nodePort);
    if (nodePort.length === 0 && typeof port.nodePort === 'number' && port.nodePort !== 0 && (port.nodePort < nodePortRange.first || port.nodePort > nodePortRange.last)) {
      causes.push({
        reason: 'FieldValueInvalid',
        field: `spec.ports[${i}].nodePort`,
        message: `Invalid value: ${port.nodePort}: provided port is not in the valid range. The range of valid ports is ${nodePortRange.first}-${nodePortRange.last}`,
      });
    }
  }
  return causes;
}

function podCauses(obj: KubeObject): StatusCause[] {
  const spec = isPlainObject(obj.spec) ? obj.spec : {};
  const status = isPlainObject(obj.status) ? obj.status : {};
  const causes: StatusCause[] = [];
  for (const list of ['containers', 'initContainers', 'ephemeralContainers']) {
    for (const [container, i] of objectsAt(spec[list])) {
      for (const [port, j] of objectsAt(container.ports)) {
        causes.push(...portCauses(`spec.${list}[${i}].ports[${j}].containerPort`, port.containerPort));
        causes.push(...portCauses(`spec.${list}[${i}].ports[${j}].hostPort`, port.hostPort, true));
      }
    }
  }
  for (const single of ['podIP', 'hostIP']) {
    if (status[single] !== '') causes.push(...ipCauses(`status.${single}`, status[single]));
  }
  for (const list of ['podIPs', 'hostIPs']) {
    for (const [entry, i] of objectsAt(status[list])) causes.push(...ipCauses(`status.${list}[${i}].ip`, entry.ip));
  }
  return causes;
}

function endpointSliceCauses(obj: KubeObject): StatusCause[] {
  // FQDN slices hold names, not addresses.
  const family = obj.addressType === 'IPv4' || obj.addressType === 'IPv6' ? obj.addressType : undefined;
  if (family === undefined) return [];
  return objectsAt(obj.endpoints).flatMap(([endpoint, i]) => ipListCauses(`endpoints[${i}].addresses`, endpoint.addresses, family));
}

function nodeCauses(obj: KubeObject): StatusCause[] {
  const status = isPlainObject(obj.status) ? obj.status : {};
  // kube-apiserver parses no Node address, not even an InternalIP (the kubelet reports what it finds, names
  // included); it refuses only a type and address pair listed twice, as field.Duplicate words it.
  const seen = new Set<string>();
  return objectsAt(status.addresses).flatMap(([address, i]) => {
    const key = JSON.stringify([address.type, address.address]);
    if (!seen.has(key)) {
      seen.add(key);
      return [];
    }
    const value = `core.NodeAddress{Type:${JSON.stringify(address.type ?? '')}, Address:${JSON.stringify(address.address ?? '')}}`;
    return [{ reason: 'FieldValueDuplicate', field: `status.addresses[${i}]`, message: `Duplicate value: ${value}` }];
  });
}

const causesByKind: Record<string, (obj: KubeObject) => StatusCause[]> = {
  'v1/Service': serviceCauses,
  'v1/Pod': podCauses,
  'discovery.k8s.io/v1/EndpointSlice': endpointSliceCauses,
  'v1/Node': nodeCauses,
  ...rbacCausesByKind,
};

/** Port numbers and addresses of `obj` that kube-apiserver would refuse, as Status causes naming their fields. */
export function valueCauses(obj: KubeObject): StatusCause[] {
  const kind = `${obj.apiVersion}/${obj.kind}`;
  return Object.hasOwn(causesByKind, kind) ? (causesByKind[kind] as (obj: KubeObject) => StatusCause[])(obj) : [];
}
