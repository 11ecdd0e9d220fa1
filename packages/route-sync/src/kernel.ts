import type { SyncFailures } from '@kube-router/controller';
import type { CommandError, IpFamily, IpRoute2 } from '@kube-router/netfilter';
import { fromIpRoute, routeKey, routeObject, type InstalledRoute } from './kernel-route.js';
import { renderRouteChange, type RouteChange } from './plan.js';

/** Every route of ours in the kernel, in every table, of one family. */
export async function listOwnRoutes(ip: IpRoute2, family: IpFamily, protocol: number): Promise<InstalledRoute[]> {
  const listed = await ip.routes({ family, table: 'all', protocol });
  return listed.flatMap((route) => fromIpRoute(family, route) ?? []);
}

export interface AppliedChanges {
  readonly added: number;
  readonly removed: number;
  /** The changes that did not take effect. */
  readonly failed: ReadonlySet<RouteChange>;
}

/**
 * Applies every change in one `ip -force -batch`: each is attempted, and each failure is added to `failures` against
 * its route. When ip cannot run at all, the one error is reported once and every change counts as failed.
 */
export async function applyRouteChanges(
  ip: IpRoute2,
  changes: readonly RouteChange[],
  protocol: number,
  failures: SyncFailures,
): Promise<AppliedChanges> {
  const failed = new Set<RouteChange>();
  let lines;
  try {
    lines = await ip.batchEach(changes.map((change) => renderRouteChange(change, protocol)));
  } catch (error) {
    failures.add(`routes (${changes.length} changes)`, error);
    return { added: 0, removed: 0, failed: new Set(changes) };
  }
  for (const { line, error } of lines) {
    const change = changes[line - 1]!;
    failed.add(change);
    failures.add(routeObject(change.route), explain(change, error));
  }
  let added = 0;
  let removed = 0;
  for (const change of changes) {
    if (failed.has(change)) continue;
    if (change.kind === 'remove') removed++;
    else added++;
  }
  return { added, removed, failed };
}

function explain(change: RouteChange, error: CommandError): CommandError {
  if (change.kind === 'add' && /File exists/.test(error.stderr)) {
    return error.withHint(
      `a route that route-sync does not own holds ${routeKey(change.route)}; it is left in place and ours is not installed`,
    );
  }
  return error;
}
