import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';

/** Plain objects for the pure model's unit tests. */
export function service(name: string, spec: V1Service['spec'] = {}, extra: { annotations?: Record<string, string>; labels?: Record<string, string>; status?: V1Service['status'] } = {}): V1Service {
  return {
    metadata: { namespace: 'default', name, ...(extra.annotations && { annotations: extra.annotations }), ...(extra.labels && { labels: extra.labels }) },
    spec: { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80, protocol: 'TCP' }], ...spec },
    ...(extra.status && { status: extra.status }),
  };
}

export interface SliceEndpoint {
  ip: string;
  node?: string;
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
  zones?: string[];
  nodes?: string[];
}

export function slice(endpoints: SliceEndpoint[], ports = [{ name: 'http', port: 8080, protocol: 'TCP' }], addressType = 'IPv4'): V1EndpointSlice {
  return {
    metadata: { name: `s-${addressType}` },
    addressType,
    ports,
    endpoints: endpoints.map((endpoint) => ({
      addresses: [endpoint.ip],
      nodeName: endpoint.node ?? 'node-a',
      conditions: { ready: endpoint.ready ?? true, ...(endpoint.serving !== undefined && { serving: endpoint.serving }), ...(endpoint.terminating !== undefined && { terminating: endpoint.terminating }) },
      ...((endpoint.zones || endpoint.nodes) && { hints: { forZones: (endpoint.zones ?? []).map((zone) => ({ name: zone })), forNodes: (endpoint.nodes ?? []).map((node) => ({ name: node })) } }),
    })),
  };
}

export function node(addresses: { type: string; address: string }[] = [{ type: 'InternalIP', address: '192.168.1.1' }], zone?: string): V1Node {
  return { metadata: { name: 'node-a', ...(zone && { labels: { 'topology.kubernetes.io/zone': zone } }) }, status: { addresses } };
}
