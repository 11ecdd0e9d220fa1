import { hasDefaultMetric, routeKey, sameRoute, type InstalledRoute, type KernelRoute } from './kernel-route.js';

/**
 * One change to the kernel. A missing route is added with `route add`, never `replace`, so that a route another
 * tool owns at the same destination makes the add fail (and is reported) instead of being taken over.
 */
export type RouteChange =
  | { readonly kind: 'add'; readonly route: KernelRoute }
  | { readonly kind: 'replace'; readonly route: KernelRoute }
  | { readonly kind: 'remove'; readonly route: InstalledRoute };

/**
 * What turns the routes of ours in the kernel into the wanted ones. Level-triggered: the kernel listing, not a memory
 * of earlier syncs, says what is installed, so a route removed by hand is put back and a route left by an earlier run
 * (or withdrawn while the agent was down) is removed. Removals come first.
 */
export function planRouteChanges(wanted: readonly KernelRoute[], installed: readonly InstalledRoute[]): RouteChange[] {
  const installedByKey = new Map<string, InstalledRoute[]>();
  for (const route of installed) {
    const key = routeKey(route);
    const group = installedByKey.get(key);
    if (group) group.push(route);
    else installedByKey.set(key, [route]);
  }
  const removals: RouteChange[] = [];
  const updates: RouteChange[] = [];
  const wantedKeys = new Set<string>();
  for (const route of wanted) {
    const key = routeKey(route);
    wantedKeys.add(key);
    const group = installedByKey.get(key) ?? [];
    // `route replace` acts on the route of the default metric; one of ours at another metric is a leftover.
    const current = group.find(hasDefaultMetric);
    for (const extra of group) if (extra !== current) removals.push({ kind: 'remove', route: extra });
    if (!current) updates.push({ kind: 'add', route });
    else if (!sameRoute(route, current)) updates.push({ kind: 'replace', route });
  }
  for (const [key, group] of installedByKey) {
    if (wantedKeys.has(key)) continue;
    for (const route of group) removals.push({ kind: 'remove', route });
  }
  return [...removals, ...updates];
}

/** The `ip -batch` line of a change; every line carries our protocol number, deletions included. */
export function renderRouteChange(change: RouteChange, protocol: number): string {
  const { route } = change;
  const words = [change.kind === 'remove' ? 'del' : change.kind, route.destination];
  if (change.kind !== 'remove') {
    if (route.gateway !== undefined) words.push('via', route.gateway);
    if (route.device !== undefined) words.push('dev', route.device);
  }
  // The kernel deletes only a route whose protocol matches: a foreign route at the same destination is never hit.
  words.push('proto', String(protocol), 'table', String(route.table));
  if (change.kind === 'remove' && change.route.metric !== undefined) words.push('metric', String(change.route.metric));
  return `route ${words.join(' ')}`;
}
