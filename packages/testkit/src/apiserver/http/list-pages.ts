import { badRequest, expired } from '../errors.js';
import type { KubeObject } from '../kube-object.js';

interface ContinueToken {
  /** The resourceVersion of the first page; later pages are served only while the history still reaches it. */
  rv: number;
  /** The namespace/name key of the last object already returned. */
  start: string;
}

function keyOf(obj: KubeObject): string {
  return `${obj.metadata.namespace ?? ''}/${obj.metadata.name ?? ''}`;
}

function decodeToken(token: string): ContinueToken {
  try {
    const parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as ContinueToken;
    if (typeof parsed.rv === 'number' && typeof parsed.start === 'string') return parsed;
  } catch {
    // fall through to the error below
  }
  throw badRequest('continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)');
}

export interface Page {
  items: KubeObject[];
  continueToken: string | undefined;
  remainingItemCount: number | undefined;
  resourceVersion: number;
}

/**
 * One page of a chunked list (`limit` and `continue`, which kubectl get uses with limit=500). Pages after the
 * first read the current state after the last returned key; a token older than the history window is
 * expired, as an etcd-compacted continue token is.
 */
export function paginate(
  sortedItems: KubeObject[],
  currentRevision: number,
  oldestResumable: number,
  limit: number | undefined,
  continueToken: string | undefined,
): Page {
  let items = sortedItems;
  let revision = currentRevision;
  if (continueToken) {
    const token = decodeToken(continueToken);
    if (token.rv < oldestResumable) {
      throw expired('The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.');
    }
    revision = token.rv;
    items = items.filter((obj) => keyOf(obj) > token.start);
  }
  if (limit === undefined || limit <= 0 || items.length <= limit) {
    return { items, continueToken: undefined, remainingItemCount: undefined, resourceVersion: revision };
  }
  const page = items.slice(0, limit);
  const next: ContinueToken = { rv: revision, start: keyOf(page[page.length - 1] as KubeObject) };
  return {
    items: page,
    continueToken: Buffer.from(JSON.stringify(next)).toString('base64url'),
    remainingItemCount: items.length - limit,
    resourceVersion: revision,
  };
}
