import { CoreV1Api, DiscoveryV1Api, NetworkingV1Api } from '@kubernetes/client-node';
import type {
  ConfigurationOptions,
  KubeConfig,
  KubernetesObject,
  KubernetesListObject,
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

export interface ListParams {
  fieldSelector?: string;
  labelSelector?: string;
  limit?: number;
  _continue?: string;
}

export interface ApiClients {
  core: CoreV1Api;
  discovery: DiscoveryV1Api;
  networking: NetworkingV1Api;
}

export interface ResourceDescriptor<T extends KubernetesObject> {
  readonly name: ResourceName;
  readonly apiVersion: string;
  readonly kind: string;
  /** The watch path across all namespaces. */
  readonly path: string;
  /** client-node's model name, to deserialize watch events into the same shape as listed objects. */
  readonly model: string;
  readonly namespaced: boolean;
  list(clients: ApiClients, params: ListParams, options: ConfigurationOptions): Promise<KubernetesListObject<T>>;
}

type Descriptors = { [R in ResourceName]: ResourceDescriptor<ResourceTypes[R]> };

export const RESOURCES: Descriptors = {
  pods: {
    name: 'pods',
    apiVersion: 'v1',
    kind: 'Pod',
    path: '/api/v1/pods',
    model: 'V1Pod',
    namespaced: true,
    list: (clients, params, options) => clients.core.listPodForAllNamespaces(params, options),
  },
  namespaces: {
    name: 'namespaces',
    apiVersion: 'v1',
    kind: 'Namespace',
    path: '/api/v1/namespaces',
    model: 'V1Namespace',
    namespaced: false,
    list: (clients, params, options) => clients.core.listNamespace(params, options),
  },
  nodes: {
    name: 'nodes',
    apiVersion: 'v1',
    kind: 'Node',
    path: '/api/v1/nodes',
    model: 'V1Node',
    namespaced: false,
    list: (clients, params, options) => clients.core.listNode(params, options),
  },
  services: {
    name: 'services',
    apiVersion: 'v1',
    kind: 'Service',
    path: '/api/v1/services',
    model: 'V1Service',
    namespaced: true,
    list: (clients, params, options) => clients.core.listServiceForAllNamespaces(params, options),
  },
  endpointslices: {
    name: 'endpointslices',
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    path: '/apis/discovery.k8s.io/v1/endpointslices',
    model: 'V1EndpointSlice',
    namespaced: true,
    list: (clients, params, options) => clients.discovery.listEndpointSliceForAllNamespaces(params, options),
  },
  networkpolicies: {
    name: 'networkpolicies',
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    path: '/apis/networking.k8s.io/v1/networkpolicies',
    model: 'V1NetworkPolicy',
    namespaced: true,
    list: (clients, params, options) => clients.networking.listNetworkPolicyForAllNamespaces(params, options),
  },
};

export const RESOURCE_NAMES = Object.keys(RESOURCES) as ResourceName[];

export function isResourceName(name: string): name is ResourceName {
  return Object.hasOwn(RESOURCES, name);
}

export function makeApiClients(kubeConfig: KubeConfig): ApiClients {
  return {
    core: kubeConfig.makeApiClient(CoreV1Api),
    discovery: kubeConfig.makeApiClient(DiscoveryV1Api),
    networking: kubeConfig.makeApiClient(NetworkingV1Api),
  };
}
