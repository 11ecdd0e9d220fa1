import type { AddressInfo } from 'node:net';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { healthRoutes, type HealthRegistry } from '@kube-router/healthcheck';
import { metricsRoutes, type AgentMetrics } from '@kube-router/metrics';
import { sharesServer, type ListenAddress, type MetricsListenAddress } from './options.js';

export interface ServersSpec {
  health: ListenAddress | false;
  metrics: MetricsListenAddress | false;
  healthRegistry: HealthRegistry;
  agentMetrics: AgentMetrics;
  logger: Logger;
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
