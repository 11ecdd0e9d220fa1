import type { UserInfo } from './authentication.js';

/**
 * What the authorizer decides on (authorizer.Attributes): a resource request names a verb on a resource of an API
 * group, maybe in a namespace, maybe of one name; any other request (discovery, OpenAPI, /version) is a path.
 */
export type RequestAttributes =
  | {
      readonly resourceRequest: true;
      readonly user: UserInfo;
      readonly verb: string;
      readonly apiGroup: string;
      readonly apiVersion: string;
      readonly namespace: string;
      readonly resource: string;
      readonly subresource: string;
      readonly name: string;
      readonly path: string;
    }
  | { readonly resourceRequest: false; readonly user: UserInfo; readonly verb: string; readonly path: string };

const methodVerbs: Record<string, string> = { POST: 'create', GET: 'get', HEAD: 'get', PUT: 'update', PATCH: 'patch', DELETE: 'delete' };
/** Namespace subresources: `namespaces/<name>/status` is the Namespace's status, not a resource named status. */
const namespaceSubresources = new Set(['status', 'finalize']);
const specialVerbs = new Set(['proxy', 'watch']);

/**
 * A boolean query parameter as apimachinery converts it: absent is false, `0` and `false` (any case) are false, and
 * anything else, even an empty value, is true. The handlers read it the same way, so what is authorized is what runs.
 */
export function queryFlag(value: string | null): boolean {
  return value !== null && value !== '0' && value.toLowerCase() !== 'false';
}

/** The name a field selector pins, as apimachinery's RequiresExactMatch("metadata.name") reads it. */
function exactName(fieldSelector: string | null): string | undefined {
  if (!fieldSelector) return undefined;
  for (const requirement of fieldSelector.split(',')) {
    const match = /^\s*metadata\.name\s*(==|=)\s*(.*?)\s*$/.exec(requirement);
    if (match && match[2] !== undefined && /^[^/%]+$/.test(match[2]) && match[2] !== '.' && match[2] !== '..') return match[2];
  }
  return undefined;
}

/**
 * kube-apiserver's RequestInfoFactory: the attributes of a request from its method and URL alone, before any handler
 * knows whether the resource exists. `/api/v1/...` and `/apis/<group>/<version>/...` below the version are resource
 * requests; a GET without a name is a list (a watch with `watch=true` or the `/watch/` prefix), a DELETE without one
 * a deletecollection, and a list pinned to one name by `fieldSelector=metadata.name=<name>` carries that name.
 */
export function requestAttributes(user: UserInfo, method: string, url: string): RequestAttributes {
  const parsed = new URL(url, 'http://embedded');
  const path = parsed.pathname;
  const nonResource = { resourceRequest: false as const, user, verb: method.toLowerCase(), path };
  let parts = path.split('/').filter((part) => part !== '').map((part) => safeDecode(part));
  if (parts.length < 3) return nonResource;
  const prefix = parts[0];
  if (prefix !== 'api' && prefix !== 'apis') return nonResource;
  parts = parts.slice(1);
  let apiGroup = '';
  if (prefix === 'apis') {
    if (parts.length < 3) return nonResource;
    apiGroup = parts[0] as string;
    parts = parts.slice(1);
  }
  const apiVersion = parts[0] as string;
  parts = parts.slice(1);

  let verb: string;
  if (specialVerbs.has(parts[0] as string)) {
    if (parts.length < 2) return nonResource;
    verb = parts[0] as string;
    parts = parts.slice(1);
  } else {
    verb = methodVerbs[method.toUpperCase()] ?? '';
  }

  let namespace = '';
  if (parts[0] === 'namespaces') {
    if (parts.length > 1) {
      namespace = parts[1] as string;
      if (parts.length > 2 && !namespaceSubresources.has(parts[2] as string)) parts = parts.slice(2);
    }
  }
  const resource = parts[0] ?? '';
  let name = parts.length >= 2 ? (parts[1] as string) : '';
  const subresource = parts.length >= 3 && verb !== 'proxy' ? (parts[2] as string) : '';

  const watchParam = queryFlag(parsed.searchParams.get('watch'));
  if (name === '' && verb === 'get') {
    verb = watchParam ? 'watch' : 'list';
    name = exactName(parsed.searchParams.get('fieldSelector')) ?? '';
  } else if (verb === 'get' && watchParam && subresource === '') {
    // This server answers a named GET with watch=true with a watch of that object, so it is authorized as one.
    verb = 'watch';
  }
  if (name === '' && verb === 'delete') verb = 'deletecollection';
  return { resourceRequest: true, user, verb, apiGroup, apiVersion, namespace, resource, subresource, name, path };
}

function safeDecode(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}
