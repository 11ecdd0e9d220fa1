import type { SchedulerOptions } from '@kube-router/controller';
import { DEFAULT_HEALTH_PORT } from '@kube-router/healthcheck';
import { DEFAULT_METRICS_PATH } from '@kube-router/metrics';

/** Where a server listens. Port 0 picks a free port (tests); a disabled server is `false`, not port 0. */
export interface ListenAddress {
  /** An IP address, or "" for every address, IPv6 and IPv4 (kube-router's default). */
  addr: string;
  port: number;
}

export interface MetricsListenAddress extends ListenAddress {
  path: string;
  /** Serve GET /explain (--enable-explain): the netpol verdict on a flow, when netpol is in the assembly. */
  explain?: boolean;
}

export interface AgentOptions {
  /** This node's name, handed to every plugin (kube-router: NODE_NAME or --hostname-override). */
  nodeName: string;
  /**
   * The health server (/healthz, /livez, /readyz). `false` runs no server while the checks keep running, which is what
   * kube-router's `--health-port=0` means. Default port 20244 on every address (addr "", IPv4 and IPv6).
   */
  health?: Partial<ListenAddress> | false;
  /** The metrics server. Default `false`: as in kube-router, metrics are served only when a port is given. */
  metrics?: (Partial<MetricsListenAddress> & { port: number }) | false;
  /** Grace added to each controller's sync period to form its health window, unless it sets its own. Default 30 s. */
  healthGraceMs?: number;
  /** Health windows by controller name; these win over anything a plugin asks for. */
  healthWindowsMs?: Record<string, number>;
  /** Backoff of failed syncs, for every controller. */
  scheduler?: Pick<SchedulerOptions, 'initialBackoffMs' | 'maxBackoffMs'>;
  /** Process and Node.js runtime metrics next to the agent's own. Default true. */
  collectDefaultMetrics?: boolean;
  /**
   * How long stop() waits, in all, for running syncs to end and controllers to stop. A controller that has not stopped
   * by then is reported and left behind, so that a wedged sync cannot outlast the pod's termination grace period.
   * Default 20 s (Kubernetes' default grace period is 30 s).
   */
  stopTimeoutMs?: number;
}

export interface ResolvedAgentOptions {
  nodeName: string;
  health: ListenAddress | false;
  metrics: MetricsListenAddress | false;
  healthGraceMs: number;
  healthWindowsMs: Record<string, number>;
  scheduler: Pick<SchedulerOptions, 'initialBackoffMs' | 'maxBackoffMs'>;
  collectDefaultMetrics: boolean;
  stopTimeoutMs: number;
}

/** Fills in defaults and returns the problems of the options, if any. */
export function resolveAgentOptions(options: AgentOptions): { resolved: ResolvedAgentOptions; problems: string[] } {
  const problems: string[] = [];
  const health: ListenAddress | false =
    options.health === false
      ? false
      : { addr: options.health?.addr ?? '', port: options.health?.port ?? DEFAULT_HEALTH_PORT };
  const metrics: MetricsListenAddress | false =
    options.metrics === false || options.metrics === undefined
      ? false
      : {
          addr: options.metrics.addr ?? '',
          port: options.metrics.port,
          path: options.metrics.path ?? DEFAULT_METRICS_PATH,
          explain: options.metrics.explain ?? false,
        };
  if (typeof options.nodeName !== 'string' || options.nodeName === '') problems.push('nodeName must be set');
  for (const [what, server] of [['health', health], ['metrics', metrics]] as const) {
    if (server && !(Number.isInteger(server.port) && server.port >= 0 && server.port <= 65535)) {
      problems.push(`${what} port ${server.port} is not a port number (0-65535)`);
    }
  }
  if (metrics) {
    if (!metrics.path.startsWith('/')) problems.push(`metrics path ${JSON.stringify(metrics.path)} must start with /`);
    if (health && sharesServer(health, metrics)) {
      if (health.addr !== metrics.addr) {
        problems.push(
          `health and metrics share port ${health.port} but listen on different addresses (${health.addr}, ${metrics.addr})`,
        );
      }
      if (/^\/(healthz|livez|readyz)(\/|$)/.test(metrics.path)) {
        problems.push(`metrics path ${metrics.path} collides with the health endpoints on port ${health.port}`);
      }
    }
  }
  const windows = { ...options.healthWindowsMs };
  for (const [name, windowMs] of Object.entries(windows)) {
    if (!(windowMs > 0)) problems.push(`health window of ${name} must be positive, got ${windowMs}`);
  }
  if (options.healthGraceMs !== undefined && !(options.healthGraceMs >= 0)) {
    problems.push(`health grace must not be negative, got ${options.healthGraceMs}`);
  }
  return {
    resolved: {
      nodeName: options.nodeName,
      health,
      metrics,
      healthGraceMs: options.healthGraceMs ?? 30_000,
      healthWindowsMs: windows,
      scheduler: { ...options.scheduler },
      collectDefaultMetrics: options.collectDefaultMetrics ?? true,
      stopTimeoutMs: options.stopTimeoutMs ?? 20_000,
    },
    problems,
  };
}

/** One server serves both when their fixed ports are equal; port 0 means "any free port", so never shared. */
export function sharesServer(health: ListenAddress, metrics: ListenAddress): boolean {
  return health.port !== 0 && health.port === metrics.port;
}
