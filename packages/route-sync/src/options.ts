import { z } from 'zod';

/** kube-router's protocol number for the routes it injects (routes.ZebraOriginator = 0x11). */
export const ROUTE_PROTOCOL = 17;

export const routeSyncOptions = z.strictObject({
  /** --injected-routes-sync-period: how often the kernel is compared with the wanted routes even without a change. */
  syncPeriodMs: z.number().int().positive().default(60_000),
  minSyncIntervalMs: z.number().int().nonnegative().optional(),
  syncTimeoutMs: z.number().int().nonnegative().optional(),
  /**
   * The protocol number that marks the routes route-sync owns: it adds, replaces and deletes only routes with this
   * number. 0-4 are the kernel's own (unspec, redirect, kernel, boot, static) and are refused.
   */
  protocol: z.number().int().min(5).max(255).default(ROUTE_PROTOCOL),
  /** --enable-ipv4 / --enable-ipv6: which families' routes are listed and programmed; defaults as kube-router's flags. */
  enableIpv4: z.boolean().default(true),
  enableIpv6: z.boolean().default(false),
  /**
   * How long the routes of ours that an earlier run left in the kernel are kept while no owner wants them (90 s, the
   * agent passes --bgp-graceful-restart-time). An agent restart must not cut pods off while routing-bgp relearns its
   * routes from its peers; a route this run installed and an owner withdrew goes at once. 0 removes leftovers on the
   * first sync.
   */
  adoptionGraceMs: z.number().int().nonnegative().default(90_000),
  /** Runs every `ip` command inside this network namespace. */
  netns: z.string().min(1).optional(),
  /** Deadline of each `ip` command. */
  commandTimeoutMs: z.number().int().positive().default(30_000),
});

export type RouteSyncOptions = z.input<typeof routeSyncOptions>;
export type ResolvedRouteSyncOptions = z.output<typeof routeSyncOptions>;
