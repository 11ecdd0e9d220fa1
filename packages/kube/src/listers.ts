import type {
  V1EndpointSlice,
  V1Namespace,
  V1NetworkPolicy,
  V1Node,
  V1Pod,
  V1Service,
  KubernetesObject,
} from '@kubernetes/client-node';
import type { IndexFunction } from './indexer.js';
import type { ResourceName } from './resources.js';
import type { SharedInformer } from './shared-informer.js';

/**
 * Read access to an informer's cache. The objects are the cache's own: treat them as read-only, and copy before
 * changing one (for example to update it on the API server).
 */
export interface Lister<T> {
  /** Every object in the cache. */
  list(): T[];
  /** Whether the informer has loaded its first list. Before that, the lister answers from an empty cache. */
  hasSynced(): boolean;
}

export interface ClusterLister<T> extends Lister<T> {
  get(name: string): T | undefined;
}

export interface NamespacedLister<T> extends Lister<T> {
  get(namespace: string, name: string): T | undefined;
  listInNamespace(namespace: string): T[];
}

export interface PodLister extends NamespacedLister<V1Pod> {
  /** The pods scheduled to a node (spec.nodeName). */
  listOnNode(nodeName: string): V1Pod[];
}

export interface EndpointSliceLister extends NamespacedLister<V1EndpointSlice> {
  /** The slices of a Service, by their `kubernetes.io/service-name` label. */
  listForService(namespace: string, serviceName: string): V1EndpointSlice[];
}

/** The lister each resource type gets. */
export interface ListerTypes {
  pods: PodLister;
  namespaces: ClusterLister<V1Namespace>;
  nodes: ClusterLister<V1Node>;
  services: NamespacedLister<V1Service>;
  endpointslices: EndpointSliceLister;
  networkpolicies: NamespacedLister<V1NetworkPolicy>;
}

export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

const podsByNode: IndexFunction<V1Pod> = (pod) => (pod.spec?.nodeName ? [pod.spec.nodeName] : []);
const slicesByService: IndexFunction<V1EndpointSlice> = (slice) => {
  const service = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
  return service ? [`${slice.metadata?.namespace ?? ''}/${service}`] : [];
};

/** The secondary indexes each resource type keeps, for its lister. */
export function indexesFor(resource: ResourceName): Record<string, IndexFunction<KubernetesObject>> {
  switch (resource) {
    case 'pods':
      return { node: podsByNode as IndexFunction<KubernetesObject> };
    case 'endpointslices':
      return { service: slicesByService as IndexFunction<KubernetesObject> };
    default:
      return {};
  }
}

export function makeLister<R extends ResourceName>(resource: R, informer: SharedInformer<KubernetesObject>): ListerTypes[R] {
  const base = {
    list: () => informer.list(),
    hasSynced: () => informer.hasSynced(),
  };
  if (resource === 'namespaces' || resource === 'nodes') {
    return { ...base, get: (name: string) => informer.get(name) } as ListerTypes[R];
  }
  const namespaced = {
    ...base,
    get: (namespace: string, name: string) => informer.get(name, namespace),
    // ListWatch lists everything for an empty namespace; an empty namespace holds nothing.
    listInNamespace: (namespace: string) => (namespace ? informer.list(namespace) : []),
  };
  if (resource === 'pods') {
    return { ...namespaced, listOnNode: (nodeName: string) => informer.byIndex('node', nodeName) } as unknown as ListerTypes[R];
  }
  if (resource === 'endpointslices') {
    return {
      ...namespaced,
      listForService: (namespace: string, serviceName: string) => informer.byIndex('service', `${namespace}/${serviceName}`),
    } as unknown as ListerTypes[R];
  }
  return namespaced as unknown as ListerTypes[R];
}
