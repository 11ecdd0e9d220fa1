import type { KubeObject } from './kube-object.js';
import { coreEventToEventsV1, eventsV1ToCoreEvent } from './event-conversion.js';

export type KubeVerb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection';

const allVerbs: readonly KubeVerb[] = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

/** One served resource: how it is addressed, discovered and stored. */
export interface ResourceType {
  readonly group: string;
  readonly version: string;
  readonly apiVersion: string;
  readonly kind: string;
  readonly plural: string;
  readonly singular: string;
  readonly namespaced: boolean;
  readonly shortNames: readonly string[];
  readonly categories: readonly string[];
  readonly verbs: readonly KubeVerb[];
  /** Whether writes to the main resource keep the stored status and `/status` writes change only the status. */
  readonly hasStatusSubresource: boolean;
  /** Field selector labels accepted besides metadata.name and metadata.namespace, as dotted paths. */
  readonly selectableFields: readonly string[];
  /**
   * Two API versions of one kind share one store (events and events.k8s.io events, as in a real cluster):
   * objects are kept in the storage resource's shape and converted at the edge.
   */
  readonly storage?: {
    readonly resource: ResourceType;
    toStorage(obj: KubeObject): KubeObject;
    fromStorage(obj: KubeObject): KubeObject;
  };
}

interface ResourceSpec {
  group?: string;
  version?: string;
  kind: string;
  plural: string;
  namespaced: boolean;
  shortNames?: string[];
  categories?: string[];
  hasStatusSubresource?: boolean;
  selectableFields?: string[];
  storage?: ResourceType['storage'];
}

export function defineResource(spec: ResourceSpec): ResourceType {
  const group = spec.group ?? '';
  const version = spec.version ?? 'v1';
  return {
    group,
    version,
    apiVersion: group === '' ? version : `${group}/${version}`,
    kind: spec.kind,
    plural: spec.plural,
    singular: spec.kind.toLowerCase(),
    namespaced: spec.namespaced,
    shortNames: spec.shortNames ?? [],
    categories: spec.categories ?? [],
    verbs: allVerbs,
    hasStatusSubresource: spec.hasStatusSubresource ?? false,
    selectableFields: spec.selectableFields ?? [],
    ...(spec.storage ? { storage: spec.storage } : {}),
  };
}

const coreEvents = defineResource({
  kind: 'Event',
  plural: 'events',
  namespaced: true,
  shortNames: ['ev'],
  selectableFields: [
    'involvedObject.kind',
    'involvedObject.namespace',
    'involvedObject.name',
    'involvedObject.uid',
    'involvedObject.apiVersion',
    'involvedObject.resourceVersion',
    'involvedObject.fieldPath',
    'reason',
    'reportingComponent',
    'type',
  ],
});

/** Every resource the embedded server serves, in discovery order. */
export const builtinResources: readonly ResourceType[] = [
  defineResource({
    kind: 'Namespace',
    plural: 'namespaces',
    namespaced: false,
    shortNames: ['ns'],
    hasStatusSubresource: true,
    selectableFields: ['status.phase'],
  }),
  defineResource({
    kind: 'Node',
    plural: 'nodes',
    namespaced: false,
    shortNames: ['no'],
    hasStatusSubresource: true,
    selectableFields: ['spec.unschedulable'],
  }),
  defineResource({
    kind: 'Pod',
    plural: 'pods',
    namespaced: true,
    shortNames: ['po'],
    categories: ['all'],
    hasStatusSubresource: true,
    selectableFields: [
      'spec.nodeName',
      'spec.restartPolicy',
      'spec.schedulerName',
      'spec.serviceAccountName',
      'spec.hostNetwork',
      'status.phase',
      'status.podIP',
      'status.nominatedNodeName',
    ],
  }),
  defineResource({
    kind: 'Service',
    plural: 'services',
    namespaced: true,
    shortNames: ['svc'],
    categories: ['all'],
    hasStatusSubresource: true,
    selectableFields: ['spec.clusterIP', 'spec.type'],
  }),
  coreEvents,
  // The identities RBAC bindings name; the server keeps them as objects (it mints no tokens: see the `tokens` option).
  defineResource({ kind: 'ServiceAccount', plural: 'serviceaccounts', namespaced: true, shortNames: ['sa'] }),
  defineResource({
    group: 'discovery.k8s.io',
    kind: 'EndpointSlice',
    plural: 'endpointslices',
    namespaced: true,
  }),
  defineResource({
    group: 'networking.k8s.io',
    kind: 'NetworkPolicy',
    plural: 'networkpolicies',
    namespaced: true,
    shortNames: ['netpol'],
  }),
  defineResource({
    group: 'coordination.k8s.io',
    kind: 'Lease',
    plural: 'leases',
    namespaced: true,
  }),
  defineResource({
    group: 'events.k8s.io',
    kind: 'Event',
    plural: 'events',
    namespaced: true,
    shortNames: ['ev'],
    selectableFields: [
      'regarding.kind',
      'regarding.namespace',
      'regarding.name',
      'regarding.uid',
      'regarding.apiVersion',
      'regarding.resourceVersion',
      'regarding.fieldPath',
      'reason',
      'reportingController',
      'type',
    ],
    storage: { resource: coreEvents, toStorage: eventsV1ToCoreEvent, fromStorage: coreEventToEventsV1 },
  }),
  // What the RBAC authorizer reads, when the server enforces it (the `rbac` option); stored like any other kind.
  defineResource({ group: 'rbac.authorization.k8s.io', kind: 'ClusterRole', plural: 'clusterroles', namespaced: false }),
  defineResource({ group: 'rbac.authorization.k8s.io', kind: 'ClusterRoleBinding', plural: 'clusterrolebindings', namespaced: false }),
  defineResource({ group: 'rbac.authorization.k8s.io', kind: 'Role', plural: 'roles', namespaced: true }),
  defineResource({ group: 'rbac.authorization.k8s.io', kind: 'RoleBinding', plural: 'rolebindings', namespaced: true }),
];

/** Lookup of served resources by URL (group, version, plural) and by object (apiVersion, kind). */
export class ResourceRegistry {
  readonly resources: readonly ResourceType[];

  constructor(resources: readonly ResourceType[] = builtinResources) {
    this.resources = resources;
  }

  byPlural(group: string, version: string, plural: string): ResourceType | undefined {
    return this.resources.find((r) => r.group === group && r.version === version && r.plural === plural);
  }

  byKind(apiVersion: string, kind: string): ResourceType | undefined {
    return this.resources.find((r) => r.apiVersion === apiVersion && r.kind === kind);
  }

  /** Groups in discovery order, each with its versions. */
  groups(): { name: string; versions: string[] }[] {
    const groups = new Map<string, string[]>();
    for (const resource of this.resources) {
      const versions = groups.get(resource.group) ?? [];
      if (!versions.includes(resource.version)) versions.push(resource.version);
      groups.set(resource.group, versions);
    }
    return [...groups].map(([name, versions]) => ({ name, versions }));
  }

  inGroupVersion(group: string, version: string): ResourceType[] {
    return this.resources.filter((r) => r.group === group && r.version === version);
  }
}

/** The store key of a resource: resources sharing storage share it. */
export function storageKey(resource: ResourceType): string {
  const stored = resource.storage?.resource ?? resource;
  return `${stored.group}/${stored.plural}`;
}
