import { createSyncController, setLongTimeout, SyncFailures, type Controller, type PluginContext } from '@kube-router/controller';
import type { IpFamily, IpRoute2 } from '@kube-router/netfilter';
import { routeKey, routeObject, type InstalledRoute, type KernelRoute } from './kernel-route.js';
import { applyRouteChanges, listOwnRoutes } from './kernel.js';
import { RouteSyncMetrics } from './metrics.js';
import { planRouteChanges, renderRouteChange, type RouteChange } from './plan.js';
import type { WantedRoutes } from './wanted-routes.js';

/** The controller's name: its health check and the `controller` label of its sync metrics. */
export const ROUTE_SYNC_CONTROLLER = 'route-sync';

export interface RouteSyncSettings {
  /** The protocol number that marks our routes (kube-router's 17). */
  protocol: number;
  families: Readonly<Record<IpFamily, boolean>>;
  syncPeriodMs: number;
  /** How long routes an earlier run left are kept while no owner wants them (see the option). */
  adoptionGraceMs: number;
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
  /**
   * The routes of ours found in the kernel by the first listing, until the adoption grace ends: kept while no owner
   * wants them, because after a restart the owners have not relearned their routes yet. Undefined before that listing
   * and after the grace.
   */
  let adopted: Set<string> | undefined;
  /** Whether the first listing is still to come and the grace not over: only then is `adopted` taken. */
  let adopting = settings.adoptionGraceMs > 0;
  let graceTimer: { clear(): void } | undefined;
  /**
   * Each route this controller last saw installed as wanted (key to its `ip` words): one the next listing finds gone
   * or changed, while still wanted the same, was removed or replaced behind the agent's back, which is drift.
   */
  let inPlace = new Map<string, string>();

  return createSyncController(ctx, {
    name: ROUTE_SYNC_CONTROLLER,
    syncPeriodMs: settings.syncPeriodMs,
    ...(settings.minSyncIntervalMs !== undefined && { minSyncIntervalMs: settings.minSyncIntervalMs }),
    ...(settings.syncTimeoutMs !== undefined && { syncTimeoutMs: settings.syncTimeoutMs }),
    start({ requestSync }) {
      unsubscribe = wanted.onChange(() => requestSync('routes changed'));
      if (settings.adoptionGraceMs > 0) {
        graceTimer = setLongTimeout(() => {
          if (adopted && adopted.size > 0) ctx.logger.info({ routes: adopted.size }, 'adoption grace over: routes nobody relearned go');
          adopting = false;
          adopted = undefined;
          requestSync('adoption grace over');
        }, settings.adoptionGraceMs);
      }
    },
    stop() {
      // The routes stay: pods keep their connectivity while the agent restarts, and the next run adopts them.
      unsubscribe?.();
      graceTimer?.clear();
    },
    async sync({ progress, driftRepaired }) {
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
        if (adopting && listed.size === families.length) {
          adopting = false;
          adopted = new Set(installed.map(routeKey));
          if (adopted.size > 0) ctx.logger.info({ routes: adopted.size, graceMs: settings.adoptionGraceMs }, 'adopted the routes an earlier run left');
        }
        if (adopted) for (const route of programmable) adopted.delete(routeKey(route));
        const kept = adopted;
        // An adopted route nobody wants yet stays in the kernel (and out of the plan) until the grace is over.
        const changes = planRouteChanges(programmable, kept ? installed.filter((route) => !kept.has(routeKey(route))) : installed);
        driftRepaired('route', drifted(changes, inPlace, settings.protocol));
        const applied = await applyRouteChanges(ip, changes, settings.protocol, failures);
        inPlace = routesInPlace(programmable, applied.failed, settings.protocol);
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

/** The changes that put back a route last seen in place and still wanted the same: removed or replaced by hand. */
function drifted(changes: readonly RouteChange[], inPlace: ReadonlyMap<string, string>, protocol: number): string[] {
  return changes
    .filter((change) => change.kind !== 'remove' && inPlace.get(routeKey(change.route)) === routeWords(change.route, protocol))
    .map((change) => routeWords(change.route, protocol));
}

/** The wanted routes that are in the kernel after a sync: all but those whose change failed. */
function routesInPlace(programmable: readonly KernelRoute[], failed: ReadonlySet<RouteChange>, protocol: number): Map<string, string> {
  const failedKeys = new Set([...failed].filter((change) => change.kind !== 'remove').map((change) => routeKey(change.route)));
  return new Map(programmable.filter((route) => !failedKeys.has(routeKey(route))).map((route) => [routeKey(route), routeWords(route, protocol)]));
}

const routeWords = (route: KernelRoute, protocol: number): string => renderRouteChange({ kind: 'add', route }, protocol).slice('route add '.length);
