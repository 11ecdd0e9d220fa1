import { setTimeout as sleep } from 'node:timers/promises';
import Fastify from 'fastify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { UserInfo } from '../authentication.js';
import { ApiError, errorForCode, requestEntityTooLarge, resourceNotFound, unauthorized } from '../errors.js';
import type { Decision } from '../rbac.js';
import { forbidden } from '../rbac.js';
import type { RequestAttributes } from '../request-attributes.js';
import { requestAttributes } from '../request-attributes.js';
import type { KubeVerb } from '../resources.js';
import { maxRequestBodyBytes } from './body-bounds.js';
import { apiGroupDocument, apiGroupList, apiResourceList, apiVersions, serverVersion } from './discovery.js';
import { openApiV3GroupVersion, openApiV3Root } from './openapi.js';
import type { ResourceHandlerContext } from './resource-handler.js';
import { handleResourceRequest } from './resource-handler.js';

const allMethods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
const HEALTH_PATHS = ['/healthz', '/livez', '/readyz'];

export interface AppContext extends ResourceHandlerContext {
  /** host:port clients reach the server at, for /api's serverAddressByClientCIDRs. */
  serverAddress(): string;
  /** Serve HTTPS with this key and certificate (PEM). */
  https?: { key: string; cert: string };
  /** Who a request's Authorization header authenticates; undefined refuses it with 401. */
  authenticate?(authorization: string | undefined): UserInfo | undefined;
  /** Whether the user may make the request (RBAC); a refusal is answered 403 before any handler runs. */
  authorize?(attributes: RequestAttributes): Decision;
}

function sendError(reply: FastifyReply, error: unknown): FastifyReply {
  const apiError =
    error instanceof ApiError
      ? error
      : (error as { code?: unknown }).code === 'FST_ERR_CTP_BODY_TOO_LARGE'
        ? requestEntityTooLarge(maxRequestBodyBytes)
        : errorForCode(
          typeof (error as { statusCode?: unknown }).statusCode === 'number' ? (error as { statusCode: number }).statusCode : 500,
          (error as Error).message ?? String(error),
        );
  return reply.code(apiError.code).type('application/json').send(apiError.toStatus());
}

function found<T>(document: T | undefined): T {
  if (document === undefined) throw resourceNotFound();
  return document;
}

/** The Fastify application: discovery, OpenAPI and resource routes, with latency injection and Status errors. */
export function buildApp(context: AppContext): FastifyInstance {
  const options = { logger: false, bodyLimit: maxRequestBodyBytes, forceCloseConnections: true } as const;
  // One FastifyInstance type for both: the routes below do not depend on the transport.
  const app = (context.https ? Fastify({ ...options, https: context.https }) : Fastify(options)) as unknown as FastifyInstance;
  // The authenticated user of each request, for the request log.
  const users = new WeakMap<FastifyRequest, string>();
  const resources: ResourceHandlerContext = { ...context, userOf: (request) => users.get(request) };

  // Bodies are parsed per request, because the content type decides between JSON, YAML and patch types.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

  app.addHook('onRequest', async (request) => {
    if (context.faults.latencyMs > 0) await sleep(context.faults.latencyMs);
    // As kube-apiserver with anonymous access off: no valid bearer token, no API (the health endpoints stay open, as
    // kube-apiserver's are for probes).
    const path = request.url.split('?')[0] ?? '';
    if (!context.authenticate || HEALTH_PATHS.includes(path)) return;
    const user = context.authenticate(request.headers.authorization);
    if (user === undefined) throw unauthorized();
    users.set(request, user.name);
    if (!context.authorize) return;
    // As kube-apiserver's authorization filter: from the URL alone, before routing, so a resource that does not exist
    // is still 403 to whoever may not read it.
    const attributes = requestAttributes(user, request.method, request.url);
    const decision = context.authorize(attributes);
    if (decision.allowed) return;
    context.requests.record({
      method: request.method,
      path,
      verb: attributes.resourceRequest ? (attributes.verb as KubeVerb) : 'discovery',
      ...(attributes.resourceRequest && {
        group: attributes.apiGroup,
        resource: attributes.resource,
        ...(attributes.subresource && { subresource: attributes.subresource }),
        ...(attributes.namespace && { namespace: attributes.namespace }),
        ...(attributes.name && { name: attributes.name }),
      }),
      user: user.name,
      forbidden: true,
    });
    throw forbidden(attributes, decision.reason);
  });
  app.setErrorHandler((error, _request, reply) => sendError(reply, error));
  app.setNotFoundHandler((_request, reply) => sendError(reply, resourceNotFound()));

  const discovery = (request: FastifyRequest): void => {
    const user = users.get(request);
    context.requests.record({ method: request.method, path: request.url.split('?')[0] ?? '', verb: 'discovery', ...(user !== undefined && { user }) });
  };

  app.get('/version', async (request) => {
    discovery(request);
    return serverVersion;
  });
  for (const path of HEALTH_PATHS) {
    app.get(path, async (_request, reply) => reply.type('text/plain').send('ok'));
  }
  app.get('/api', async (request) => {
    discovery(request);
    return apiVersions(context.serverAddress());
  });
  app.get('/apis', async (request) => {
    discovery(request);
    return apiGroupList(context.registry);
  });
  app.get('/apis/:group', async (request) => {
    discovery(request);
    return found(apiGroupDocument(context.registry, (request.params as { group: string }).group));
  });
  app.get('/api/v1', async (request) => {
    discovery(request);
    return found(apiResourceList(context.registry, '', 'v1'));
  });
  app.get('/apis/:group/:version', async (request) => {
    discovery(request);
    const { group, version } = request.params as { group: string; version: string };
    return found(apiResourceList(context.registry, group, version));
  });
  app.get('/openapi/v3', async (request) => {
    discovery(request);
    return openApiV3Root(context.registry);
  });
  app.get('/openapi/v3/*', async (request) => {
    discovery(request);
    return found(openApiV3GroupVersion(context.registry, (request.params as { '*': string })['*']));
  });

  app.route({
    method: [...allMethods],
    url: '/api/v1/*',
    handler: (request, reply) => handleResourceRequest(resources, request, reply, '', 'v1', (request.params as { '*': string })['*']),
  });
  app.route({
    method: [...allMethods],
    url: '/apis/:group/:version/*',
    handler: (request, reply) => {
      const params = request.params as { group: string; version: string; '*': string };
      return handleResourceRequest(resources, request, reply, params.group, params.version, params['*']);
    },
  });
  return app;
}
