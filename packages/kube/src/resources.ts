import type {
  V1EndpointSlice,
  V1Namespace,
  V1NetworkPolicy,
  V1Node,
  V1Pod,
  V1Service,
} from '@kubernetes/client-node';

/** The resource types the agent informs on, by their plural name. Leases are read directly by leader election. */
export interface ResourceTypes {
  pods: V1Pod;
  namespaces: V1Namespace;
  nodes: V1Node;
  services: V1Service;
  endpointslices: V1EndpointSlice;
  networkpolicies: V1NetworkPolicy;
}

export type ResourceName = keyof ResourceTypes;

/** How the informers list, watch and read one resource type. */
export interface ResourceDescriptor {
  readonly name: ResourceName;
  readonly apiVersion: string;
  readonly kind: string;
  /** The list and watch path across all namespaces. */
  readonly path: string;
  /** client-node's model name, that listed and watched objects are deserialized into. */
  readonly model: string;
  readonly namespaced: boolean;
}

type Descriptors = Record<ResourceName, ResourceDescriptor>;

export const RESOURCES: Descriptors = {
  pods: {
    name: 'pods',
    apiVersion: 'v1',
    kind: 'Pod',
    path: '/api/v1/pods',
    model: 'V1Pod',
    namespaced: true,
  },
  namespaces: {
    name: 'namespaces',
    apiVersion: 'v1',
    kind: 'Namespace',
    path: '/api/v1/namespaces',
    model: 'V1Namespace',
    namespaced: false,
  },
  nodes: {
    name: 'nodes',
    apiVersion: 'v1',
    kind: 'Node',
    path: '/api/v1/nodes',
    model: 'V1Node',
    namespaced: false,
  },
  services: {
    name: 'services',
    apiVersion: 'v1',
    kind: 'Service',
    path: '/api/v1/services',
    model: 'V1Service',
    namespaced: true,
  },
  endpointslices: {
    name: 'endpointslices',
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    path: '/apis/discovery.k8s.io/v1/endpointslices',
    model: 'V1EndpointSlice',
    namespaced: true,
  },
  networkpolicies: {
    name: 'networkpolicies',
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    path: '/apis/networking.k8s.io/v1/networkpolicies',
    model: 'V1NetworkPolicy',
    namespaced: true,
  },
};

export const RESOURCE_NAMES = Object.keys(RESOURCES) as ResourceName[];

export function isResourceName(name: string): name is ResourceName {
  return Object.hasOwn(RESOURCES, name);
}
