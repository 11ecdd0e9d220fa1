import type { InjectedRoute, RouteSyncService } from '@kube-router/controller';
import { routeKey, routeObject, toKernelRoute, type KernelRoute } from './kernel-route.js';

/** A handed route that cannot be installed, with the object its failure is reported against. */
export interface RouteProblem {
  readonly object: string;
  readonly error: Error;
}

/**
 * The routes every owner wants, as last set. This is route-sync's only memory, and it holds intent, not kernel state:
 * a withdrawn route is absent from its owner's next set and therefore from every sync after it (kube-router #1738
 * kept a cache of routes to put back, and put back routes whose withdrawal it had missed).
 */
export class WantedRoutes implements RouteSyncService {
  readonly #owners = new Map<string, readonly InjectedRoute[]>();
  readonly #listeners = new Set<() => void>();
  /** resolve()'s answer until the next setRoutes: a periodic sync of an unchanged set validates nothing again. */
  #resolved: { routes: KernelRoute[]; problems: RouteProblem[] } | undefined;

  setRoutes(owner: string, routes: readonly InjectedRoute[]): void {
    this.#resolved = undefined;
    if (routes.length === 0) this.#owners.delete(owner);
    else this.#owners.set(owner, routes.map((route) => ({ ...route })));
    for (const listener of this.#listeners) listener();
  }

  wantedRoutes(): readonly InjectedRoute[] {
    const seen = new Set<string>();
    const routes: InjectedRoute[] = [];
    for (const [, route] of this.#byOwner()) {
      const key = lenientKey(route);
      if (seen.has(key)) continue;
      seen.add(key);
      routes.push({ ...route });
    }
    return routes;
  }

  /** Calls `listener` after every setRoutes; returns the unsubscribe function. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * The wanted routes validated and canonical, one per destination and table, plus what cannot be installed: an
   * invalid route, or a second owner wanting another next hop for a destination (the owner first by name wins).
   */
  resolve(): { readonly routes: readonly KernelRoute[]; readonly problems: readonly RouteProblem[] } {
    this.#resolved ??= this.#resolve();
    return this.#resolved;
  }

  #resolve(): { routes: KernelRoute[]; problems: RouteProblem[] } {
    const chosen = new Map<string, { owner: string; route: KernelRoute }>();
    const problems: RouteProblem[] = [];
    for (const [owner, injected] of this.#byOwner()) {
      let route: KernelRoute;
      try {
        route = toKernelRoute(injected);
      } catch (error) {
        problems.push({ object: `route/${injected.destination}`, error: error as Error });
        continue;
      }
      const key = routeKey(route);
      const first = chosen.get(key);
      if (!first) {
        chosen.set(key, { owner, route });
      } else if (first.route.gateway !== route.gateway || first.route.device !== route.device) {
        problems.push({
          object: routeObject(route),
          error: new Error(
            `${owner} wants ${describeNextHop(route)} but ${first.owner} wants ${describeNextHop(first.route)}; ` +
              `${first.owner}'s route is installed`,
          ),
        });
      }
    }
    return { routes: [...chosen.values()].map((entry) => entry.route), problems };
  }

  *#byOwner(): Generator<[string, InjectedRoute]> {
    for (const owner of [...this.#owners.keys()].sort()) {
      for (const route of this.#owners.get(owner) ?? []) yield [owner, route];
    }
  }
}

function lenientKey(route: InjectedRoute): string {
  try {
    return routeKey(toKernelRoute(route));
  } catch {
    return `${route.destination} table ${route.table ?? 'main'}`;
  }
}

function describeNextHop(route: KernelRoute): string {
  return [route.gateway && `via ${route.gateway}`, route.device && `dev ${route.device}`].filter(Boolean).join(' ');
}
