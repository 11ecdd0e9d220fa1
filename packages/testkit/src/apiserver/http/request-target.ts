import { resourceNotFound } from '../errors.js';
import type { ResourceRegistry, ResourceType } from '../resources.js';

/** What a resource URL addresses: a collection (no name) or one object, maybe a subresource of it. */
export interface ResourceTarget {
  resource: ResourceType;
  namespace: string | undefined;
  name: string | undefined;
  subresource: string | undefined;
  /** The deprecated `/watch/` path prefix, which turns a GET into a watch. */
  watchPrefix: boolean;
}

/**
 * Parses the segments after `/api/v1/` or `/apis/<group>/<version>/`:
 * `[watch/][namespaces/<ns>/]<plural>[/<name>[/<subresource>]]`.
 */
export function parseResourceTarget(
  registry: ResourceRegistry,
  group: string,
  version: string,
  path: string,
): ResourceTarget {
  let segments = path.split('/').filter((segment) => segment !== '').map(decodeURIComponent);
  const watchPrefix = segments[0] === 'watch';
  if (watchPrefix) segments = segments.slice(1);

  let namespace: string | undefined;
  // `namespaces/<name>/status` and `namespaces/<name>/finalize` address the Namespace itself.
  const namespaceSubresource = group === '' && segments.length === 3 && (segments[2] === 'status' || segments[2] === 'finalize');
  if (segments[0] === 'namespaces' && segments.length >= 3 && !namespaceSubresource) {
    namespace = segments[1];
    segments = segments.slice(2);
  }
  const [plural, name, subresource, ...extra] = segments;
  const resource = plural === undefined ? undefined : registry.byPlural(group, version, plural);
  if (!resource || extra.length > 0) throw resourceNotFound();
  if (namespace !== undefined && !resource.namespaced) throw resourceNotFound();
  if (subresource !== undefined && !(subresource === 'status' && resource.hasStatusSubresource)) throw resourceNotFound();
  return { resource, namespace, name, subresource, watchPrefix };
}
