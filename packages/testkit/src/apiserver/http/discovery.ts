import type { ResourceRegistry, ResourceType } from '../resources.js';

export const serverVersion = {
  major: '1',
  minor: '32',
  gitVersion: 'v1.32.0-krt-testkit',
  gitCommit: '0000000000000000000000000000000000000000',
  gitTreeState: 'clean',
  buildDate: '2025-01-01T00:00:00Z',
  goVersion: 'go1.23.4',
  compiler: 'gc',
  platform: 'linux/amd64',
};

/** GET /api: the legacy core group's versions. */
export function apiVersions(serverAddress: string) {
  return {
    kind: 'APIVersions',
    versions: ['v1'],
    serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }],
  };
}

function apiGroup(group: { name: string; versions: string[] }) {
  const versions = group.versions.map((version) => ({ groupVersion: `${group.name}/${version}`, version }));
  return { kind: 'APIGroup', apiVersion: 'v1', name: group.name, versions, preferredVersion: versions[0] };
}

/** GET /apis: every named group (the core group is served under /api). */
export function apiGroupList(registry: ResourceRegistry) {
  return {
    kind: 'APIGroupList',
    apiVersion: 'v1',
    groups: registry
      .groups()
      .filter((group) => group.name !== '')
      .map((group) => {
        const { kind: _kind, apiVersion: _apiVersion, ...rest } = apiGroup(group);
        return rest;
      }),
  };
}

/** GET /apis/<group>, or undefined when the group is not served. */
export function apiGroupDocument(registry: ResourceRegistry, name: string) {
  const group = registry.groups().find((candidate) => candidate.name === name && name !== '');
  return group ? apiGroup(group) : undefined;
}

function apiResources(resource: ResourceType) {
  const main = {
    name: resource.plural,
    singularName: resource.singular,
    namespaced: resource.namespaced,
    kind: resource.kind,
    verbs: resource.verbs,
    ...(resource.shortNames.length > 0 ? { shortNames: resource.shortNames } : {}),
    ...(resource.categories.length > 0 ? { categories: resource.categories } : {}),
  };
  if (!resource.hasStatusSubresource) return [main];
  return [main, { name: `${resource.plural}/status`, singularName: '', namespaced: resource.namespaced, kind: resource.kind, verbs: ['get', 'patch', 'update'] }];
}

/** GET /api/v1 or /apis/<group>/<version>: the resources kubectl's RESTMapper learns names, kinds and scopes from. */
export function apiResourceList(registry: ResourceRegistry, group: string, version: string) {
  const resources = registry.inGroupVersion(group, version);
  if (resources.length === 0) return undefined;
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: group === '' ? version : `${group}/${version}`,
    resources: resources.flatMap(apiResources),
  };
}
