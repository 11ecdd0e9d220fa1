import { defineServiceKey } from './controller.js';

/**
 * A kernel route that a routing plugin wants on this node. route-sync owns it once handed over: it installs it with
 * its own protocol number, puts it back when something removes it, and removes it when no owner wants it any more.
 */
export interface InjectedRoute {
  /** The destination prefix, canonical CIDR (`10.244.1.0/24`, `fd00:10:244:1::/64`). */
  destination: string;
  /** The next hop; absent for a device route. */
  gateway?: string;
  /** The output device: a tunnel for overlay routes, or the interface the next hop is reached on. */
  device?: string;
  /** Kernel routing table; default main (254). */
  table?: number;
}

/**
 * The service route-sync provides to the plugins that require it (routing-bgp). Each owner replaces its whole set at
 * once (level-triggered), so a withdrawn route is simply absent from the next set; the two plugins never import each
 * other, only this contract.
 */
export interface RouteSyncService {
  /** Replaces every route of `owner` with `routes`, and asks for a sync soon. */
  setRoutes(owner: string, routes: readonly InjectedRoute[]): void;
  /** The routes of every owner as last set, deduplicated by destination and table. */
  wantedRoutes(): readonly InjectedRoute[];
}

/** The key under which route-sync provides its service; routing plugins list `route-sync` in `requires`. */
export const routeSyncServiceKey = defineServiceKey<RouteSyncService>('route-sync');
