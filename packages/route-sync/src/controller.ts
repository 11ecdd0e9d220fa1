import { createSyncController, SyncFailures, type Controller, type PluginContext } from '@kube-router/controller';
import type { IpFamily, IpRoute2 } from '@kube-router/netfilter';
import { routeObject, type InstalledRoute } from './kernel-route.js';
import { applyRouteChanges, listOwnRoutes } from './kernel.js';
import { RouteSyncMetrics } from './metrics.js';
import { planRouteChanges } from './plan.js';
import type { WantedRoutes } from './wanted-routes.js';

/** The controller's name: its health check and the `controller` label of its sync metrics. */
export const ROUTE_SYNC_CONTROLLER = 'route-sync';

export interface RouteSyncSettings {
  /** The protocol number that marks our routes (kube-router's 17). */
  protocol: number;
  families: Readonly<Record<IpFamily, boolean>>;
  syncPeriodMs: number;
  minSyncIntervalMs?: number;
  syncTimeoutMs?: number;
}

/**
 * Reconciles the kernel's routes of our protocol with the wanted ones: a sync on every change of the wanted set and
 * at least every period, each one a full comparison of the kernel listing with the wanted set.
 */
export function createRouteSyncController(
  ctx: PluginContext,
  world: { ip: IpRoute2; wanted: WantedRoutes },
  settings: RouteSyncSettings,
): Controller {
  const metrics = new RouteSyncMetrics(ctx.metrics.registry);
  const { ip, wanted } = world;
  const families = (['ipv4', 'ipv6'] as const).filter((family) => settings.families[family]);
  let unsubscribe: (() => void) | undefined;

  return createSyncController(ctx, {
    name: ROUTE_SYNC_CONTROLLER,
    syncPeriodMs: settings.syncPeriodMs,
    ...(settings.minSyncIntervalMs !== undefined && { minSyncIntervalMs: settings.minSyncIntervalMs }),
    ...(settings.syncTimeoutMs !== undefined && { syncTimeoutMs: settings.syncTimeoutMs }),
    start({ requestSync }) {
      unsubscribe = wanted.onChange(() => requestSync('routes changed'));
    },
    stop() {
      // The routes stay: pods keep their connectivity while the agent restarts, and the next run adopts them.
      unsubscribe?.();
    },
    async sync({ progress }) {
      const endTimer = metrics.syncTime.startTimer();
      try {
        const failures = new SyncFailures();
        const { routes, problems } = wanted.resolve();
        for (const problem of problems) failures.add(problem.object, problem.error);
        const installed: InstalledRoute[] = [];
        const listed = new Set<IpFamily>();
        for (const family of families) {
          await failures.attempt(`routes/${family}`, async () => {
            installed.push(...(await listOwnRoutes(ip, family, settings.protocol)));
            listed.add(family);
          });
        }
        const programmable = routes.filter((route) => {
          if (listed.has(route.family)) return true;
          if (!settings.families[route.family]) {
            failures.add(routeObject(route), new Error(`${route.family} is disabled on this node`));
          }
          return false;
        });
        progress();
        const changes = planRouteChanges(programmable, installed);
        const applied = await applyRouteChanges(ip, changes, settings.protocol, failures);
        metrics.added.inc(applied.added);
        metrics.removed.inc(applied.removed);
        const notInstalled = [...applied.failed].filter((change) => change.kind !== 'remove').length;
        metrics.synced.set(programmable.length - notInstalled);
        ctx.logger.debug(
          { wanted: routes.length, installed: installed.length, added: applied.added, removed: applied.removed },
          'routes reconciled',
        );
        failures.throwIfAny(ROUTE_SYNC_CONTROLLER);
      } finally {
        endTimer();
      }
    },
  });
}
