import { badRequest } from '../errors.js';
import type { ResourceType } from '../resources.js';
import type { ListPage, ObjectStore, Selectors } from '../store/object-store.js';

interface ContinueToken {
  /** The resourceVersion of the first page: every later page is served as the collection was then. */
  rv: number;
  /** The namespace/name key of the last object already examined. */
  start: string;
}

function decodeToken(token: string): ContinueToken {
  try {
    const parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as ContinueToken;
    if (Number.isSafeInteger(parsed.rv) && parsed.rv >= 0 && typeof parsed.start === 'string') return parsed;
  } catch {
    // fall through to the error below
  }
  throw badRequest('continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)');
}

export interface Page extends ListPage {
  continueToken: string | undefined;
}

/**
 * One page of a chunked list (`limit` and `continue`, which informers and kubectl get use with limit=500). Every page
 * is consistent at the first page's resourceVersion, as kube-apiserver's pages from etcd are; a token older than the
 * watch history is expired (410), as an etcd-compacted continue token is. The store walks its ordered keys from the
 * token's, so a page costs what it holds. `remainingItemCount` is given only without selectors, as kube-apiserver
 * gives it.
 */
export function listPage(
  store: ObjectStore,
  resource: ResourceType,
  namespace: string | undefined,
  selectors: Selectors,
  limit: number | undefined,
  continueToken: string | undefined,
): Page {
  const token = continueToken ? decodeToken(continueToken) : undefined;
  const page = store.listPage(resource, namespace, selectors, {
    // The page is only serialized: no copies.
    shared: true,
    ...(limit !== undefined ? { limit } : {}),
    ...(token ? { continueFrom: { resourceVersion: token.rv, key: token.start } } : {}),
  });
  const next: ContinueToken | undefined = page.continueAfter === undefined ? undefined : { rv: page.resourceVersion, start: page.continueAfter };
  return { ...page, continueToken: next ? Buffer.from(JSON.stringify(next)).toString('base64url') : undefined };
}
