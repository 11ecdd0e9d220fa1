import type { AddressInfo } from 'node:net';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { healthRoutes, type HealthRegistry } from '@kube-router/healthcheck';
import { metricsRoutes, type AgentMetrics } from '@kube-router/metrics';
import { isIP } from 'node:net';
import { messageOf, type ServicePathExplainer } from '@kube-router/controller';
import type { NetpolExplainService } from '@kube-router/netpol';
import { sharesServer, type ListenAddress, type MetricsListenAddress } from './options.js';

export interface ServersSpec {
  health: ListenAddress | false;
  metrics: MetricsListenAddress | false;
  healthRegistry: HealthRegistry;
  agentMetrics: AgentMetrics;
  logger: Logger;
  /**
   * Served as GET /explain on the metrics server (--enable-explain with netpol in the assembly); absent: no route.
   * `services`, when a proxy in the assembly provides it, adds the Service path of a flow to a Service address.
   */
  explain?: { readonly netpol: NetpolExplainService; readonly services?: ServicePathExplainer | undefined } | undefined;
}

export interface RunningServers {
  /** Base URL of the health server, e.g. http://127.0.0.1:20244. */
  healthUrl: string | undefined;
  /** Full URL of the metrics endpoint, path included. */
  metricsUrl: string | undefined;
  close(): Promise<void>;
}

/** Starts one fastify instance per listening address: a single one when health and metrics share their port. */
export async function startServers(spec: ServersSpec): Promise<RunningServers> {
  const { health, metrics } = spec;
  const started: FastifyInstance[] = [];
  const close = async () => {
    await Promise.allSettled(started.map((app) => app.close()));
  };
  try {
    let healthUrl: string | undefined;
    let metricsUrl: string | undefined;
    const healthApp = health ? createServer(spec.logger) : undefined;
    if (healthApp) await healthApp.register(healthRoutes, { registry: spec.healthRegistry });
    const shared = health && metrics && sharesServer(health, metrics);
    const metricsApp = metrics ? (shared ? healthApp : createServer(spec.logger)) : undefined;
    if (metricsApp && metrics) {
      await metricsApp.register(metricsRoutes, { registry: spec.agentMetrics.registry, path: metrics.path });
      if (spec.explain) registerExplainRoute(metricsApp, spec.explain);
    }
    if (healthApp && health) {
      healthUrl = await listen(healthApp, health);
      started.push(healthApp);
      spec.logger.info({ url: healthUrl, serves: shared ? 'health, metrics' : 'health' }, 'health server listening');
    }
    if (metricsApp && metrics) {
      if (shared) metricsUrl = `${healthUrl}${metrics.path}`;
      else {
        metricsUrl = `${await listen(metricsApp, metrics)}${metrics.path}`;
        started.push(metricsApp);
      }
      spec.logger.info({ url: metricsUrl }, 'metrics server listening');
    }
    return { healthUrl, metricsUrl, close };
  } catch (error) {
    await close();
    throw error;
  }
}

interface ExplainQuery {
  from?: string;
  to?: string;
  port?: string;
  protocol?: string;
}

/**
 * GET /explain?from=<ns/pod|ip>&to=<ns/pod|ip>&port=<n>&protocol=<TCP|UDP|SCTP>: this node's verdict on the flow as
 * JSON (ExplainAnswer); 400 `{ error }` for a bad request, 503 before netpol's first applied sync. When `to` is the
 * address of a Service this node's proxy serves, the answer also has `service` (ServicePath): its endpoints and where
 * the client's connections went. Policies see the endpoint, not the Service address (the proxy translates first), so
 * `kube-router explain` asks again for each endpoint.
 */
function registerExplainRoute(app: FastifyInstance, explain: NonNullable<ServersSpec['explain']>): void {
  const service = explain.netpol;
  app.get<{ Querystring: ExplainQuery }>('/explain', async (request, reply) => {
    const query = request.query;
    // A repeated parameter arrives as an array: one flow per request.
    const single = (name: keyof ExplainQuery): string | undefined => {
      const value: unknown = query[name];
      return typeof value === 'string' ? value : undefined;
    };
    const repeated = (Object.keys(query) as (keyof ExplainQuery)[]).filter((name) => Array.isArray(query[name]));
    if (repeated.length > 0) return reply.code(400).send({ error: `${repeated.join(', ')} given more than once` });
    const result = service.explain({ from: single('from') ?? '', to: single('to') ?? '', port: single('port'), protocol: single('protocol') });
    if (!result.ok) return reply.code(result.status).send({ error: result.error });
    const { answer } = result;
    const to = single('to') ?? '';
    if (!explain.services || isIP(to) === 0) return reply.send(answer);
    try {
      const path = await explain.services.explainServiceFlow({ source: answer.from.ip, destination: to, port: answer.flow.port, protocol: answer.flow.protocol });
      return reply.send(path ? { ...answer, service: path } : answer);
    } catch (error) {
      // The policy verdict stands; only the proxy's side (its connection table) could not be read.
      return reply.send({ ...answer, serviceError: messageOf(error) });
    }
  });
}

function createServer(logger: Logger): FastifyInstance {
  return Fastify({
    loggerInstance: logger.child({ component: 'http' }),
    // The kubelet probes every few seconds and Prometheus scrapes: a log line per request would drown the
    // controllers' lines.
    logController: new LogController({ disableRequestLogging: true }),
  }) as unknown as FastifyInstance;
}

/**
 * Listens on the address; "" is kube-router's default, every address: IPv6 and IPv4 on one dual-stack socket (Go's
 * `net.Listen(":port")`), or IPv4 alone on a host without IPv6.
 */
async function listen(app: FastifyInstance, address: ListenAddress): Promise<string> {
  if (address.addr !== '') {
    await app.listen({ host: address.addr, port: address.port });
    return urlOf(app, false);
  }
  try {
    await app.listen({ host: '::', port: address.port, ipv6Only: false });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'EAFNOSUPPORT' && code !== 'EADDRNOTAVAIL') throw error;
    await app.listen({ host: '0.0.0.0', port: address.port });
  }
  return urlOf(app, true);
}

function urlOf(app: FastifyInstance, everyAddress: boolean): string {
  const bound = app.server.address() as AddressInfo;
  return `http://${urlHost(bound.address, everyAddress)}:${bound.port}`;
}

/** A URL that reaches the server from this host: wildcard addresses are reached through loopback. */
function urlHost(address: string, dualStack: boolean): string {
  if (address === '0.0.0.0' || (dualStack && address === '::')) return '127.0.0.1';
  if (address === '::') return '[::1]';
  return address.includes(':') ? `[${address}]` : address;
}
