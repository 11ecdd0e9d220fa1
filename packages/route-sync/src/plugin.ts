import { definePlugin, JoinedSyncError, routeSyncServiceKey, SyncFailures } from '@kube-router/controller';
import type { ControllerPlugin, RouteSyncService } from '@kube-router/controller';
import { ExecRunner, IpRoute2, kernelHasFamily } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { createRouteSyncController, ROUTE_SYNC_CONTROLLER } from './controller.js';
import { applyRouteChanges, listOwnRoutes } from './kernel.js';
import { routeSyncOptions, type ResolvedRouteSyncOptions } from './options.js';
import { WantedRoutes } from './wanted-routes.js';

export interface RouteSyncPluginOverrides {
  /** Runs `ip`; default an ExecRunner logging to the plugin's logger. */
  readonly runner?: CommandRunner;
}

/** The route-sync plugin; `overrides` exist for tests that must break `ip` on purpose. */
export function createRouteSyncPlugin(overrides: RouteSyncPluginOverrides = {}): ControllerPlugin<ResolvedRouteSyncOptions> {
  return definePlugin({
    name: ROUTE_SYNC_CONTROLLER,
    host: '^1.0.0',
    options: routeSyncOptions,
    // A test's runner stands in for the tool.
    tools: () => (overrides.runner ? [] : ['ip']),
    create(ctx, options) {
      const wanted = new WantedRoutes();
      // Only the contract's two methods are handed out: the routing plugins never reach the controller's internals.
      const service: RouteSyncService = {
        setRoutes: (owner, routes) => wanted.setRoutes(owner, routes),
        wantedRoutes: () => wanted.wantedRoutes(),
      };
      ctx.services.provide(routeSyncServiceKey, service);
      const ip = ipFor(options, overrides.runner ?? new ExecRunner({ logger: ctx.logger }));
      return createRouteSyncController(ctx, { ip, wanted }, {
        protocol: options.protocol,
        families: { ipv4: options.enableIpv4, ipv6: options.enableIpv6 },
        syncPeriodMs: options.syncPeriodMs,
        adoptionGraceMs: options.adoptionGraceMs,
        ...(options.minSyncIntervalMs !== undefined && { minSyncIntervalMs: options.minSyncIntervalMs }),
        ...(options.syncTimeoutMs !== undefined && { syncTimeoutMs: options.syncTimeoutMs }),
      });
    },
    async cleanup(ctx, options) {
      const ip = ipFor(options, overrides.runner ?? new ExecRunner({ logger: ctx.logger }));
      const failures = new SyncFailures();
      let removed = 0;
      for (const family of ['ipv4', 'ipv6'] as const) {
        // A family disabled now may have been enabled in an earlier run: its routes go too, where the kernel has it.
        const enabled = family === 'ipv4' ? options.enableIpv4 : options.enableIpv6;
        if (!enabled && !kernelHasFamily(family)) continue;
        await failures.attempt(`routes/${family}`, async () => {
          const ours = await listOwnRoutes(ip, family, options.protocol);
          const applied = await applyRouteChanges(ip, ours.map((route) => ({ kind: 'remove', route })), options.protocol, failures);
          removed += applied.removed;
        });
      }
      ctx.logger.info({ removed, protocol: options.protocol }, 'removed the routes of our protocol');
      if (failures.size > 0) throw new JoinedSyncError([...failures.list], `${ROUTE_SYNC_CONTROLLER} cleanup`);
    },
  });
}

/** Owns the kernel routes that routing plugins hand it (kube-router's route sync of --run-router). */
export const routeSyncPlugin = createRouteSyncPlugin();

function ipFor(options: ResolvedRouteSyncOptions, runner: CommandRunner): IpRoute2 {
  return new IpRoute2({ runner, timeoutMs: options.commandTimeoutMs, ...(options.netns !== undefined && { netns: options.netns }) });
}
