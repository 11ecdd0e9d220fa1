import type { FastifyReply, FastifyRequest } from 'fastify';
import { badRequest, methodNotAllowed } from '../errors.js';
import type { FaultInjector } from '../faults.js';
import type { KubeObject } from '../kube-object.js';
import { isPlainObject } from '../kube-object.js';
import { patchTypeForContentType } from '../patch/apply-patch.js';
import { queryFlag } from '../request-attributes.js';
import type { KubeVerb, ResourceRegistry, ResourceType } from '../resources.js';
import { parseFieldSelector } from '../selectors/field-selector.js';
import { parseLabelSelector } from '../selectors/label-selector.js';
import type { ObjectStore, Selectors } from '../store/object-store.js';
import { listPage } from './list-pages.js';
import { parseBody, preferredTableVersion } from './negotiation.js';
import type { RequestLog } from './request-log.js';
import type { ResourceTarget } from './request-target.js';
import { parseResourceTarget } from './request-target.js';
import type { IncludeObject } from './table.js';
import { toTable } from './table.js';
import type { WatchStreams } from './watch.js';
import { parseWatchRevision } from './watch.js';

export interface ResourceHandlerContext {
  registry: ResourceRegistry;
  store: ObjectStore;
  watches: WatchStreams;
  faults: FaultInjector;
  requests: RequestLog;
  /** The authenticated user's name, when the server authenticates. */
  userOf?(request: FastifyRequest): string | undefined;
}

type Query = URLSearchParams;

function flag(query: Query, name: string): boolean {
  return queryFlag(query.get(name));
}

function integer(query: Query, name: string): number | undefined {
  const value = query.get(name);
  if (value === null || value === '') return undefined;
  if (!/^\d+$/.test(value)) throw badRequest(`${name}: invalid value "${value}"`);
  return Number(value);
}

function verbFor(method: string, target: ResourceTarget, query: Query): KubeVerb {
  const { resource, namespace, name, subresource } = target;
  const collectionInAllNamespaces = resource.namespaced && namespace === undefined;
  if (subresource !== undefined) {
    if (method === 'GET') return 'get';
    if (method === 'PUT') return 'update';
    if (method === 'PATCH') return 'patch';
    throw methodNotAllowed(method);
  }
  switch (method) {
    case 'GET':
      if (target.watchPrefix || flag(query, 'watch')) return 'watch';
      return name === undefined ? 'list' : 'get';
    case 'POST':
      if (name !== undefined || collectionInAllNamespaces) throw methodNotAllowed(method);
      return 'create';
    case 'PUT':
      if (name === undefined) throw methodNotAllowed(method);
      return 'update';
    case 'PATCH':
      if (name === undefined) throw methodNotAllowed(method);
      return 'patch';
    case 'DELETE':
      if (name !== undefined) return 'delete';
      if (collectionInAllNamespaces) throw methodNotAllowed(method);
      return 'deletecollection';
    default:
      throw methodNotAllowed(method);
  }
}

function selectorsFrom(query: Query, resource: ResourceType, name?: string): Selectors {
  const fieldSelector = [query.get('fieldSelector') ?? '', name ? `metadata.name=${name}` : ''].filter(Boolean).join(',');
  return {
    labelSelector: parseLabelSelector(query.get('labelSelector') ?? undefined),
    fieldSelector: parseFieldSelector(fieldSelector, resource),
  };
}

function withoutTypeMeta(obj: KubeObject): Omit<KubeObject, 'apiVersion' | 'kind'> {
  const { apiVersion: _apiVersion, kind: _kind, ...rest } = obj;
  return rest;
}

function includeObjectParam(query: Query): IncludeObject {
  const value = query.get('includeObject');
  return value === 'None' || value === 'Object' ? value : 'Metadata';
}

function requireObjectBody(body: unknown): KubeObject {
  if (!isPlainObject(body)) throw badRequest('the request body must be a JSON object');
  return body as KubeObject;
}

/** Puts the URL's namespace on the object, refusing a body that names another one (as the API server does). */
function scopeToUrl(obj: KubeObject, target: ResourceTarget): KubeObject {
  const metadata = isPlainObject(obj.metadata) ? obj.metadata : {};
  if (target.resource.namespaced) {
    if (metadata.namespace && metadata.namespace !== target.namespace) {
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
    }
    metadata.namespace = target.namespace;
  }
  if (target.name !== undefined && metadata.name !== undefined && metadata.name !== target.name) {
    throw badRequest(`the name of the object (${String(metadata.name)}) does not match the name on the URL (${target.name})`);
  }
  if (target.name !== undefined) metadata.name = target.name;
  return { ...obj, metadata };
}

function isDryRun(query: Query, body?: unknown): boolean {
  const bodyDryRun = isPlainObject(body) && Array.isArray(body.dryRun) && body.dryRun.includes('All');
  return query.getAll('dryRun').includes('All') || bodyDryRun;
}

/**
 * DeleteOptions.gracePeriodSeconds. As kube-apiserver decodes DeleteOptions: from the body when there is one, else
 * from the query (a client that sends both has its query ignored).
 */
function gracePeriodOf(query: Query, body: unknown): number | undefined {
  if (body !== undefined && body !== null) {
    if (!isPlainObject(body)) throw badRequest('the request body must be a DeleteOptions object');
    const value = body.gracePeriodSeconds;
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
      throw badRequest(`the request body could not be decoded: gracePeriodSeconds: invalid value ${JSON.stringify(value)}, expected an integer`);
    }
    return value;
  }
  const value = query.get('gracePeriodSeconds');
  if (value === null || value === '') return undefined;
  if (!/^-?\d+$/.test(value)) throw badRequest(`gracePeriodSeconds: invalid value "${value}"`);
  return Number(value);
}

/** Serves every request under /api/v1/… and /apis/<group>/<version>/… that addresses a resource. */
export async function handleResourceRequest(
  context: ResourceHandlerContext,
  request: FastifyRequest,
  reply: FastifyReply,
  group: string,
  version: string,
  path: string,
): Promise<void> {
  const { store, requests, faults, watches } = context;
  const url = new URL(request.url, 'http://embedded');
  const query = url.searchParams;
  const target = parseResourceTarget(context.registry, group, version, path);
  const { resource, namespace, name } = target;
  const verb = verbFor(request.method, target, query);
  const user = context.userOf?.(request);
  requests.record({
    method: request.method,
    path: url.pathname,
    verb,
    group,
    resource: resource.plural,
    ...(target.subresource ? { subresource: target.subresource } : {}),
    ...(namespace !== undefined ? { namespace } : {}),
    ...(name !== undefined ? { name } : {}),
    ...(user !== undefined ? { user } : {}),
  });
  const injected = faults.take(verb, resource.plural);
  if (injected) throw injected;

  const table = preferredTableVersion(request.headers.accept);
  const subresource = target.subresource === 'status' ? ('status' as const) : undefined;
  const body = () => parseBody(request.body, request.headers['content-type']);

  switch (verb) {
    case 'get': {
      const obj = store.get(resource, namespace, name as string);
      await reply.send(table ? toTable(resource, [obj], obj.metadata.resourceVersion ?? '', table, includeObjectParam(query)) : obj);
      return;
    }
    case 'list': {
      const page = listPage(store, resource, namespace, selectorsFrom(query, resource), integer(query, 'limit'), query.get('continue') ?? undefined);
      const metadata = {
        resourceVersion: String(page.resourceVersion),
        ...(page.continueToken ? { continue: page.continueToken } : {}),
        ...(page.remainingItemCount !== undefined ? { remainingItemCount: page.remainingItemCount } : {}),
      };
      if (table) {
        const rendered = toTable(resource, page.items, metadata.resourceVersion, table, includeObjectParam(query));
        await reply.send({ ...rendered, metadata });
        return;
      }
      // Like a real API server, list items carry no apiVersion/kind: the list's kind says what they are.
      await reply.send({ kind: `${resource.kind}List`, apiVersion: resource.apiVersion, metadata, items: page.items.map(withoutTypeMeta) });
      return;
    }
    case 'watch': {
      const params = {
        resource,
        namespace,
        selectors: selectorsFrom(query, resource, name),
        fromRevision: parseWatchRevision(query.get('resourceVersion') ?? undefined),
        allowWatchBookmarks: flag(query, 'allowWatchBookmarks'),
        sendInitialEvents: query.has('sendInitialEvents') ? flag(query, 'sendInitialEvents') : undefined,
        timeoutSeconds: integer(query, 'timeoutSeconds'),
        table,
        includeObject: includeObjectParam(query),
      };
      // Every parameter is checked above, so errors still become Status responses; from here on it streams.
      reply.hijack();
      watches.start(reply.raw, params);
      return;
    }
    case 'create': {
      const obj = scopeToUrl(requireObjectBody(body()), { ...target, name: undefined });
      await reply.code(201).send(store.create(resource, obj, { dryRun: isDryRun(query) }));
      return;
    }
    case 'update': {
      const obj = scopeToUrl(requireObjectBody(body()), target);
      await reply.send(store.update(resource, obj, { dryRun: isDryRun(query), ...(subresource ? { subresource } : {}) }));
      return;
    }
    case 'patch': {
      const type = patchTypeForContentType(request.headers['content-type']);
      const patch = body();
      await reply.send(store.patch(resource, namespace, name as string, type, patch, { dryRun: isDryRun(query), ...(subresource ? { subresource } : {}) }));
      return;
    }
    case 'delete': {
      const options = body();
      const preconditions = isPlainObject(options) && isPlainObject(options.preconditions) ? options.preconditions : undefined;
      const gracePeriodSeconds = gracePeriodOf(query, options);
      await reply.send(
        store.delete(resource, namespace, name as string, {
          dryRun: isDryRun(query, options),
          ...(preconditions ? { preconditions: preconditions as { uid?: string; resourceVersion?: string } } : {}),
          ...(gracePeriodSeconds !== undefined ? { gracePeriodSeconds } : {}),
        }),
      );
      return;
    }
    case 'deletecollection': {
      const options = body();
      const gracePeriodSeconds = gracePeriodOf(query, options);
      const deleted = store.deleteCollection(resource, namespace, selectorsFrom(query, resource), {
        dryRun: isDryRun(query, options),
        ...(gracePeriodSeconds !== undefined ? { gracePeriodSeconds } : {}),
      });
      await reply.send({
        kind: `${resource.kind}List`,
        apiVersion: resource.apiVersion,
        metadata: { resourceVersion: String(store.resourceVersion) },
        items: deleted.map(withoutTypeMeta),
      });
      return;
    }
  }
}
