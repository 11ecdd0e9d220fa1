import type { ResourceRegistry, ResourceType } from '../resources.js';

function groupVersionPath(group: string, version: string): string {
  return group === '' ? `api/${version}` : `apis/${group}/${version}`;
}

/** GET /openapi/v3: where each group version's document is. */
export function openApiV3Root(registry: ResourceRegistry) {
  const paths: Record<string, { serverRelativeURL: string }> = {};
  for (const group of registry.groups()) {
    for (const version of group.versions) {
      const path = groupVersionPath(group.name, version);
      paths[path] = { serverRelativeURL: `/openapi/v3/${path}?hash=krt-testkit` };
    }
  }
  return { paths };
}

function objectPath(resource: ResourceType): string {
  const base = `/${groupVersionPath(resource.group, resource.version)}`;
  return resource.namespaced ? `${base}/namespaces/{namespace}/${resource.plural}/{name}` : `${base}/${resource.plural}/{name}`;
}

/**
 * GET /openapi/v3/<group version>: a deliberately small document. kubectl reads two things from it:
 * that PATCH takes `fieldValidation` (so client-side schema validation, which would need full schemas,
 * is skipped) and whether PATCH accepts strategic merge patches. The latter is left out on purpose, so
 * kubectl apply computes its strategic merge patch from its compiled-in Go types, which carry the real
 * merge keys.
 */
export function openApiV3GroupVersion(registry: ResourceRegistry, path: string) {
  const resources = registry.resources.filter((r) => groupVersionPath(r.group, r.version) === path);
  if (resources.length === 0) return undefined;
  const paths: Record<string, unknown> = {};
  for (const resource of resources) {
    paths[objectPath(resource)] = {
      patch: {
        operationId: `patch${resource.kind}`,
        'x-kubernetes-action': 'patch',
        'x-kubernetes-group-version-kind': { group: resource.group, version: resource.version, kind: resource.kind },
        parameters: [
          { name: 'dryRun', in: 'query', schema: { type: 'string' } },
          { name: 'fieldManager', in: 'query', schema: { type: 'string' } },
          { name: 'fieldValidation', in: 'query', schema: { type: 'string' } },
        ],
        responses: { '200': { description: 'OK' } },
      },
    };
  }
  return {
    openapi: '3.0.0',
    info: { title: 'Kubernetes', version: 'v1.32.0' },
    paths,
    components: { schemas: {} },
  };
}
