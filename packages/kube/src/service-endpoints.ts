import type { V1EndpointSlice } from '@kubernetes/client-node';
import { parseIp } from './ip-address.js';
import type { IpFamily } from './ip-address.js';

/**
 * Which endpoints of a Service port a proxy sends traffic to, as kube-proxy decides it (pkg/proxy/endpointslicecache.go
 * and pkg/proxy/topology.go): backend-neutral and pure, so that every proxy (IPVS, nftables) chooses alike.
 */

/** One endpoint of one Service port, as read from the EndpointSlices. */
export interface ServiceEndpoint {
  /** Canonical text of the endpoint's address (the first of its addresses, as kube-proxy uses). */
  readonly address: string;
  readonly family: IpFamily;
  /** The port of the Service port's matching EndpointSlice port. */
  readonly port: number;
  readonly nodeName: string | undefined;
  readonly zone: string | undefined;
  /** On this node (nodeName equals the proxy's). */
  readonly local: boolean;
  /** conditions.ready (unset: true). */
  readonly ready: boolean;
  /** conditions.serving (unset: true). */
  readonly serving: boolean;
  /** conditions.terminating (unset: false). */
  readonly terminating: boolean;
  /** hints.forZones; empty when the slice gives none. */
  readonly zoneHints: readonly string[];
  /** hints.forNodes; empty when the slice gives none. */
  readonly nodeHints: readonly string[];
}

/** Something wrong in a slice: the endpoint or port is left out, the rest is used. */
export interface EndpointSliceProblem {
  readonly slice: string;
  readonly message: string;
}

export interface ServicePortEndpoints {
  /** Unique by address and port; a local copy wins over another copy of the same endpoint. */
  readonly endpoints: readonly ServiceEndpoint[];
  readonly problems: readonly EndpointSliceProblem[];
}

/** The Service port whose endpoints are read: matched to the slices' ports by name and protocol, as kube-proxy does. */
export interface ServicePortRef {
  /** The Service port's name ('' when unnamed). */
  readonly name: string;
  /** TCP (default), UDP or SCTP. */
  readonly protocol: string;
}

function isPort(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 65_535;
}

/**
 * The endpoints of one Service port across the Service's EndpointSlices, every condition kept (choose with
 * categorizeEndpoints). FQDN slices and endpoints without an address are skipped; an address or port that is not one is
 * a problem and left out. Only an endpoint's first address is used, as kube-proxy does.
 */
export function servicePortEndpoints(slices: readonly V1EndpointSlice[], port: ServicePortRef, nodeName: string): ServicePortEndpoints {
  const byKey = new Map<string, ServiceEndpoint>();
  const problems: EndpointSliceProblem[] = [];
  const protocol = port.protocol || 'TCP';
  for (const slice of slices) {
    if (slice.addressType === 'FQDN') continue;
    const sliceName = slice.metadata?.name ?? '?';
    const slicePort = (slice.ports ?? []).find((p) => (p.name ?? '') === port.name && (p.protocol ?? 'TCP') === protocol);
    // No port number: the slice does not restrict ports, which no proxy rule can express (kube-proxy skips it too).
    if (!slicePort || slicePort.port === undefined || slicePort.port === null) continue;
    if (!isPort(slicePort.port)) {
      problems.push({ slice: sliceName, message: `port ${JSON.stringify(port.name)} ${String(slicePort.port)} is outside 1-65535; its endpoints are not used` });
      continue;
    }
    for (const endpoint of slice.endpoints ?? []) {
      const text = endpoint.addresses?.[0];
      if (text === undefined) continue;
      const parsed = parseIp(text);
      if (!parsed) {
        problems.push({ slice: sliceName, message: `endpoint address ${JSON.stringify(text)} is not an IP address; it is not used` });
        continue;
      }
      const conditions = endpoint.conditions ?? {};
      const entry: ServiceEndpoint = {
        address: parsed.text,
        family: parsed.family,
        port: slicePort.port,
        nodeName: endpoint.nodeName,
        zone: endpoint.zone,
        local: endpoint.nodeName !== undefined && endpoint.nodeName === nodeName,
        ready: conditions.ready !== false,
        serving: conditions.serving !== false,
        terminating: conditions.terminating === true,
        zoneHints: (endpoint.hints?.forZones ?? []).map((hint) => hint.name).filter((name): name is string => typeof name === 'string'),
        nodeHints: (endpoint.hints?.forNodes ?? []).map((hint) => hint.name).filter((name): name is string => typeof name === 'string'),
      };
      const key = `${entry.address}|${entry.port}`;
      if (!byKey.has(key) || entry.local) byKey.set(key, entry);
    }
  }
  return { endpoints: [...byKey.values()], problems };
}

/** What a Service port's traffic policies ask for (kube-proxy's ServicePort). */
export interface EndpointPolicy {
  /** internalTrafficPolicy Local. */
  readonly internalLocal: boolean;
  /** externalTrafficPolicy Local (or kube-router.io/service.local). */
  readonly externalLocal: boolean;
  /** The port has a NodePort, an externalIP or a LoadBalancer ingress IP. */
  readonly externallyAccessible: boolean;
}

/** The node the proxy runs on: its name and its topology.kubernetes.io/zone label. */
export interface EndpointNode {
  readonly name: string;
  readonly zone?: string | undefined;
}

/** Which hints narrowed the cluster endpoints: kube-proxy's topology modes. */
export type TopologyMode = 'PreferSameNode' | 'PreferSameZone';

export interface EndpointCategories {
  /** For traffic under the Cluster policy: ready ones narrowed by hints, else serving terminating ones. */
  readonly cluster: readonly ServiceEndpoint[];
  /** For traffic under the Local policy: this node's ready ones, else this node's serving terminating ones. */
  readonly local: readonly ServiceEndpoint[];
  /** Every endpoint some traffic may reach (the union): those whose conntrack entries stay. */
  readonly allReachable: readonly ServiceEndpoint[];
  /** Some usable endpoint exists anywhere in the cluster; when false, the Service port rejects. */
  readonly hasAnyEndpoints: boolean;
  /** The hints that narrowed `cluster`, or undefined when none did. */
  readonly topology: TopologyMode | undefined;
}

/**
 * Whether any traffic of this port follows the Cluster policy (kube-proxy's UsesClusterEndpoints). An externally
 * accessible port needs them even under externalTrafficPolicy Local: pods and the node itself reaching an external
 * address are short-circuited to the Cluster endpoints.
 */
export function usesClusterEndpoints(policy: EndpointPolicy): boolean {
  return !policy.internalLocal || policy.externallyAccessible;
}

/** Whether any traffic of this port follows the Local policy (kube-proxy's UsesLocalEndpoints). */
export function usesLocalEndpoints(policy: EndpointPolicy): boolean {
  return policy.internalLocal || (policy.externallyAccessible && policy.externalLocal);
}

/**
 * kube-proxy's CategorizeEndpoints, for the endpoints of one family. Ready endpoints serve; serving terminating ones
 * only when no ready one exists (KEP-1669), decided separately for the Cluster and the Local policy. Hints
 * (trafficDistribution PreferSameNode / PreferSameZone / PreferClose, as the EndpointSlice controller writes them) narrow
 * the cluster endpoints only when every ready endpoint carries a hint of that kind and one names this node (zone);
 * otherwise they are ignored, so incomplete hints never leave a node without endpoints.
 */
export function categorizeEndpoints(endpoints: readonly ServiceEndpoint[], policy: EndpointPolicy, node: EndpointNode): EndpointCategories {
  let cluster: ServiceEndpoint[] = [];
  let topology: TopologyMode | undefined;
  let hasAnyEndpoints = false;
  if (usesClusterEndpoints(policy)) {
    topology = topologyMode(endpoints, node);
    cluster = endpoints.filter((endpoint) => endpoint.ready && availableForTopology(endpoint, topology, node));
    if (cluster.length === 0) cluster = endpoints.filter((endpoint) => endpoint.serving && endpoint.terminating);
    hasAnyEndpoints = cluster.length > 0;
  }
  if (!usesLocalEndpoints(policy)) return { cluster, local: [], allReachable: cluster, hasAnyEndpoints, topology };

  let localReady = false;
  let localTerminating = false;
  for (const endpoint of endpoints) {
    if (endpoint.ready) {
      hasAnyEndpoints = true;
      if (endpoint.local) localReady = true;
    } else if (endpoint.serving && endpoint.terminating) {
      hasAnyEndpoints = true;
      if (endpoint.local) localTerminating = true;
    }
  }
  const local = localReady
    ? endpoints.filter((endpoint) => endpoint.local && endpoint.ready)
    : localTerminating
      ? endpoints.filter((endpoint) => endpoint.local && endpoint.serving && endpoint.terminating)
      : [];
  if (!usesClusterEndpoints(policy)) return { cluster, local, allReachable: local, hasAnyEndpoints, topology };
  const allReachable = [...cluster];
  for (const endpoint of local) if (!allReachable.includes(endpoint)) allReachable.push(endpoint);
  return { cluster, local, allReachable, hasAnyEndpoints, topology };
}

/** kube-proxy's topologyModeFromHints: node hints first, then zone hints, each only when complete. */
function topologyMode(endpoints: readonly ServiceEndpoint[], node: EndpointNode): TopologyMode | undefined {
  let allNodeHints = true;
  let forThisNode = false;
  let allZoneHints = true;
  let forThisZone = false;
  let anyReady = false;
  for (const endpoint of endpoints) {
    if (!endpoint.ready) continue;
    anyReady = true;
    if (endpoint.nodeHints.length === 0) allNodeHints = false;
    else if (endpoint.nodeHints.includes(node.name)) forThisNode = true;
    if (endpoint.zoneHints.length === 0) allZoneHints = false;
    else if (node.zone !== undefined && node.zone !== '' && endpoint.zoneHints.includes(node.zone)) forThisZone = true;
  }
  if (!anyReady) return undefined;
  if (allNodeHints && forThisNode) return 'PreferSameNode';
  if (allZoneHints && forThisZone) return 'PreferSameZone';
  return undefined;
}

function availableForTopology(endpoint: ServiceEndpoint, mode: TopologyMode | undefined, node: EndpointNode): boolean {
  if (mode === 'PreferSameNode') return endpoint.nodeHints.includes(node.name);
  if (mode === 'PreferSameZone') return node.zone !== undefined && endpoint.zoneHints.includes(node.zone);
  return true;
}
