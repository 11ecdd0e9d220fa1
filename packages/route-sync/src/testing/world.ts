import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { ServiceRegistry, SyncScheduler, routeSyncServiceKey } from '@kube-router/controller';
import type { Controller, PluginContext, RouteSyncService } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import { addNetns, deleteNetns, ExecRunner, hasTool, IpRoute2 } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { createRouteSyncPlugin } from '../plugin.js';
import type { RouteSyncOptions } from '../options.js';

/** Why the kernel tests cannot run here, or undefined when they can. */
export function missingForRealTests(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root';
  return hasTool('ip') ? undefined : 'missing tool: ip';
}

/**
 * A node for route tests: a network namespace `trs-<random>` with a veth pair whose `trs0` end has 192.0.2.1/24 and
 * 2001:db8::1/64, so that gateways 192.0.2.x and 2001:db8::x are on-link and anything else is unreachable.
 */
export interface RouteNode {
  readonly netns: string;
  readonly exec: ExecRunner;
  /** `ip` in the node, for the test's own look and hand edits. */
  readonly ip: IpRoute2;
  /** Destination -> gateway (or device) of the routes with `protocol`, both families, every table. */
  routesOf(protocol: number): Promise<Map<string, string>>;
  remove(): Promise<void>;
}

export async function createRouteNode(label = 'rs'): Promise<RouteNode> {
  const exec = new ExecRunner({ defaultTimeoutMs: 10_000 });
  const netns = `trs-${randomBytes(3).toString('hex')}-${label}`;
  await addNetns(exec, netns);
  const ip = new IpRoute2({ runner: exec, netns });
  try {
    await ip.batch([
      'link add trs0 type veth peer name trs1',
      'link set trs0 up',
      'link set trs1 up',
      'address add 192.0.2.1/24 dev trs0',
      'address add 2001:db8::1/64 dev trs0 nodad',
    ]);
  } catch (error) {
    await deleteNetns(exec, netns);
    throw error;
  }
  return {
    netns,
    exec,
    ip,
    async routesOf(protocol) {
      const found = new Map<string, string>();
      for (const family of ['ipv4', 'ipv6'] as const) {
        for (const route of await ip.routes({ family, table: 'all', protocol })) {
          const where = route.table === undefined ? route.dst : `${route.dst} table ${route.table}`;
          found.set(where, route.gateway ?? `dev ${route.dev}`);
        }
      }
      return found;
    },
    remove: () => deleteNetns(exec, netns),
  };
}

export interface RouteSyncHarness {
  readonly controller: Controller;
  readonly service: RouteSyncService;
  readonly ctx: PluginContext;
  readonly health: HealthRegistry;
  readonly metrics: AgentMetrics;
}

/** route-sync's plugin created as the agent creates it, in `node`'s namespace, not started. */
export async function createRouteSync(
  node: RouteNode,
  options: RouteSyncOptions = {},
  runner: CommandRunner = node.exec,
): Promise<RouteSyncHarness> {
  const metrics = new AgentMetrics({ collectDefaultMetrics: false });
  const health = new HealthRegistry({ defaultGraceMs: 5_000 });
  const ctx: PluginContext = {
    nodeName: 'trs-node',
    logger: pino({ level: 'silent' }),
    metrics,
    health,
    services: new ServiceRegistry(),
  };
  const plugin = createRouteSyncPlugin({ runner });
  const controller = await plugin.create(ctx, plugin.options.parse({ netns: node.netns, enableIpv6: true, ...options }));
  return { controller, service: ctx.services.get(routeSyncServiceKey), ctx, health, metrics };
}

/** Starts the controller under the agent's scheduler; returns its stop function. */
export async function runScheduled(controller: Controller): Promise<{ scheduler: SyncScheduler; stop(): Promise<void> }> {
  const scheduler = new SyncScheduler(controller, { initialBackoffMs: 100 });
  const aborter = new AbortController();
  await controller.start({ requestSync: (reason) => scheduler.requestSync(reason), signal: aborter.signal });
  scheduler.start();
  return {
    scheduler,
    async stop() {
      aborter.abort();
      await scheduler.stop();
    },
  };
}

/** The repository's one waiter (`@kube-router/testkit`), here beside the harness that the tests import. */
export { waitFor } from '@kube-router/testkit';

export async function metricValue(metrics: AgentMetrics, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const metric = metrics.registry.getSingleMetric(name);
  if (!metric) return undefined;
  const { values } = await metric.get();
  return values.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val) && !('le' in v.labels))?.value;
}
