import { SyncFailures, type InjectedRoute, type RouteSyncService } from '@kube-router/controller';
import type { Logger } from 'pino';
import type { ApiPath, GobgpClient } from './gobgp-api.js';
import { AFI_OF, onLinkPrefixContains, type Family } from './nodes.js';
import { isLocalPath, isUnicast, learnedBestPaths, pathNextHop, pathPrefix, type LearnedPath } from './paths.js';
import { RestartGrace } from './restart-grace.js';

/** The window in which `catchUpAfterPaths` events make a burst. */
const BURST_WINDOW_MS = 1_000;
/** The pause waited for after gobgpd's table arrived, shorter than between events: the table is complete. */
const SNAPSHOT_QUIET_MS = 10;

export interface LearnedRoute {
  route: InjectedRoute;
  /** The peer the route was learned from. */
  neighbor: string;
}

export interface LearnedRoutesOptions {
  /** The owner of the routes in route-sync. */
  owner: string;
  routes: Pick<RouteSyncService, 'setRoutes'>;
  gobgp: () => Pick<GobgpClient, 'listRoutingPaths'>;
  /** This node's addresses with their prefix length (`ip address`): a next hop inside one is on-link. */
  localPrefixes(): Promise<string[]>;
  /** Whether some stage still wants a session with this peer: a Node deleted during a restart grace loses its routes. */
  isPeerWanted(address: string): boolean;
  /** How long routes learned before a gobgpd restart outlive it. */
  restartGraceMs: number;
  logger: Logger;
  /** How long best-path events must pause before what they changed is handed over (default 50 ms). */
  handOverDelayMs?: number;
  /** The longest a change waits for that pause while events keep coming (default 1 s: route-sync syncs at most once a second). */
  maxHandOverDelayMs?: number;
  /**
   * Asks for gobgpd's whole table anew (BestPathWatch.reopen), answered by {@link LearnedRoutes.applySnapshot}. Asked
   * when `catchUpAfterPaths` path events (default 1,000) arrived within a second since the last table: gobgpd queues a
   * peer's burst on the stream path by path, and one table of 5,000 paths arrives sooner than the rest of the queue.
   * Returns whether a table is on its way (false: no stream was open to replace, so none is waited for).
   */
  catchUp?(): boolean;
  catchUpAfterPaths?: number;
}

/**
 * The best paths peers sent, turned into kernel routes for route-sync. Kept current by gobgpd's best-path events as
 * they come, and replaced by a full listing of gobgpd's RIB on every sync (level-triggered, in case an event was
 * missed). Only a next hop on one of this node's subnets gets a route, as in kube-router without an overlay; the
 * others are left to the network's own routing.
 */
export class LearnedRoutes {
  /** The best path per destination, as gobgpd last reported it. */
  #learned = new Map<string, LearnedPath>();
  /** Counts event batches and tables, so that a listing can tell whether events arrived while it ran. */
  #eventBatches = 0;
  #tables = 0;
  /** While relist lists: the destinations events changed meanwhile (see relist). */
  #changedWhileListing: Set<string> | undefined;
  #handOverTimer: NodeJS.Timeout | undefined;
  /** When the oldest change not handed over yet arrived (Date.now()), 0 when none waits. */
  #pendingSince = 0;
  /**
   * Path events within the current burst window (see catchUpAfterPaths), when that window began, and whether a table
   * was asked for and has not come yet. Paths that trickle in over hours never ask for the table.
   */
  #burstPaths = 0;
  #burstSince = 0;
  #catchingUp = false;
  /** What was last handed to route-sync, with the neighbor each route was learned from. */
  #handedOver = new Map<string, LearnedRoute>();
  readonly #retained: RestartGrace<LearnedRoute>;
  /** This node as of the last sync; undefined until the first one read it (nothing is handed over before). */
  #node: { families: Family[]; podCidrs: readonly string[] } | undefined;
  #onLinkPrefixes: string[] = [];
  #stopped = false;

  constructor(private readonly options: LearnedRoutesOptions) {
    this.#retained = new RestartGrace(options.restartGraceMs, () => this.#handOver());
  }

  /** The families this node routes and its own pod CIDRs (never routed to a peer), as this sync read them. */
  setNode(families: readonly Family[], podCidrs: readonly string[]): void {
    this.#node = { families: [...families], podCidrs };
  }

  /** Re-reads the node's subnets, refreshed every sync: a learned next hop in one of them gets a direct route. */
  async refreshOnLinkPrefixes(): Promise<void> {
    this.#onLinkPrefixes = await this.options.localPrefixes();
  }

  applyBestPathEvents(paths: readonly ApiPath[]): void {
    this.#eventBatches++;
    const now = Date.now();
    if (now - this.#burstSince > BURST_WINDOW_MS) {
      this.#burstSince = now;
      this.#burstPaths = 0;
    }
    this.#burstPaths += paths.length;
    for (const path of paths) {
      if (!isUnicast(path, 'AFI_IP') && !isUnicast(path, 'AFI_IP6')) continue;
      const destination = pathPrefix(path);
      if (!destination) continue;
      const nextHop = pathNextHop(path);
      // A withdrawal, or our own path becoming best, ends what a peer taught us about the destination.
      if (path.isWithdraw || isLocalPath(path) || !nextHop) {
        this.#learned.delete(destination);
        this.#retained.drop(destination);
      } else this.#learned.set(destination, { destination, nextHop, neighbor: path.neighborIp! });
      this.#changedWhileListing?.add(destination);
    }
    if (this.options.catchUp && !this.#catchingUp && this.#burstPaths >= (this.options.catchUpAfterPaths ?? 1_000)) {
      // Set before asking, in case the table arrives within the call; cleared if none was asked for, or the hand-over
      // would wait for a table that never comes, now and after every later event.
      this.#catchingUp = true;
      if (!this.options.catchUp()) this.#catchingUp = false;
    }
    this.#scheduleHandOver();
  }

  /**
   * gobgpd's whole table of best paths, as a new watch stream starts with it: it replaces what events said, as a
   * relisting does (a withdrawal queued on the old stream is in it by its absence).
   */
  applySnapshot(paths: readonly ApiPath[]): void {
    this.#eventBatches++;
    this.#burstPaths = 0;
    this.#burstSince = Date.now();
    this.#catchingUp = false;
    const learned = new Map<string, LearnedPath>();
    for (const path of paths) {
      if ((!isUnicast(path, 'AFI_IP') && !isUnicast(path, 'AFI_IP6')) || path.isWithdraw || isLocalPath(path)) continue;
      const destination = pathPrefix(path);
      const nextHop = pathNextHop(path);
      if (destination && nextHop) learned.set(destination, { destination, nextHop, neighbor: path.neighborIp! });
    }
    this.#learned = learned;
    this.#tables++;
    // The table is complete as gobgpd holds it now: only a shorter pause is waited for, in case the burst goes on.
    this.#scheduleHandOver(SNAPSHOT_QUIET_MS);
  }

  /**
   * The event stream ended (gobgpd went away, or the stream that was to bring the table ended before it did): a table
   * asked for will not come, so what waits for it goes after the usual pause instead of the cap.
   */
  watchEnded(): void {
    if (!this.#catchingUp) return;
    this.#catchingUp = false;
    if (this.#pendingSince !== 0 && !this.#stopped) this.#scheduleHandOver();
  }

  #scheduleHandOver(quietMs = this.options.handOverDelayMs ?? 50): void {
    // One hand-over per burst: a peer's 5,000 UPDATEs arrive as 5,000 events over a few hundred milliseconds, and
    // every hand-over costs a full comparison here and a sync of route-sync. Each event waits for a pause in the
    // stream, but never longer than the cap, so a stream that never pauses still reaches the kernel.
    // While gobgpd's table is on its way, the part of the burst read so far is not handed over: route-sync would
    // install it and then make the rest wait for its minimum interval.
    const now = Date.now();
    if (this.#pendingSince === 0) this.#pendingSince = now;
    const deadline = this.#pendingSince + (this.options.maxHandOverDelayMs ?? 1_000);
    const wait = this.#catchingUp ? deadline - now : Math.min(quietMs, deadline - now);
    clearTimeout(this.#handOverTimer);
    const timer = setTimeout(() => {
      // A timer that fires late (the loop was busy) runs before the events that arrived meanwhile are read: the
      // pause is real only if, once they are read (setImmediate runs after I/O), none of them rescheduled.
      setImmediate(() => {
        // stop() clears the timer, not a callback the timer already queued here.
        if (this.#stopped) return;
        if (this.#handOverTimer !== timer && Date.now() < deadline) return;
        clearTimeout(this.#handOverTimer);
        this.#handOverTimer = undefined;
        this.#pendingSince = 0;
        this.#handOver();
      });
    }, Math.max(0, wait));
    this.#handOverTimer = timer;
  }

  /** Lists gobgpd's RIB in full and hands over what it holds. gobgpd unreachable: the routes handed over stay. */
  async relist(): Promise<void> {
    const node = this.#node;
    if (!node) return;
    for (let attempt = 0; ; attempt++) {
      const batchesBefore = this.#eventBatches;
      const tablesBefore = this.#tables;
      const listed = new Map<string, LearnedPath>();
      const failures = new SyncFailures();
      const changed = (this.#changedWhileListing = new Set<string>());
      try {
        for (const family of node.families) {
          const afi = AFI_OF[family];
          const paths = await failures.attempt(`learned-routes/${family}`, () => this.options.gobgp().listRoutingPaths(afi));
          for (const path of learnedBestPaths((paths ?? []).filter((p) => isUnicast(p, afi)))) listed.set(path.destination, path);
        }
      } finally {
        this.#changedWhileListing = undefined;
      }
      // The kernel keeps forwarding on what was handed over while gobgpd comes back.
      failures.throwIfAny('learned routes');
      // Events that arrived while listing may be older or newer than the listing: list again rather than guess.
      if (batchesBefore === this.#eventBatches) {
        this.#learned = listed;
        break;
      }
      if (attempt >= 2) {
        // Still events: what they changed during this listing stays as they said. One newer than the listing would
        // otherwise be lost until the next relisting, a sync period away when nothing else asks for a sync (a mesh
        // coming up during a sync); one older than it has the newer change behind it on the stream. A table that
        // came meanwhile is a whole RIB with the events behind it: kept over the listing.
        if (this.#tables === tablesBefore) this.#learned = mergeChanged(listed, this.#learned, changed);
        break;
      }
    }
    this.#handOver();
  }

  /** gobgpd restarted with an empty RIB: what it had taught us is kept for the grace period while it relearns. */
  gobgpdRestarted(): void {
    this.#learned = new Map();
    this.#catchingUp = false;
    this.#retained.keep(this.#handedOver);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#handOverTimer);
    this.#retained.stop();
  }

  #handOver(): void {
    const node = this.#node;
    if (!node || this.#stopped) return;
    const onLink = new Map<string, boolean>();
    const wanted = new Map<string, LearnedRoute>();
    for (const path of this.#learned.values()) {
      if (node.podCidrs.includes(path.destination)) continue;
      let direct = onLink.get(path.nextHop);
      if (direct === undefined) onLink.set(path.nextHop, (direct = onLinkPrefixContains(this.#onLinkPrefixes, path.nextHop)));
      if (direct) wanted.set(path.destination, { route: { destination: path.destination, gateway: path.nextHop }, neighbor: path.neighbor });
    }
    for (const [destination, kept] of this.#retained.entries()) {
      if (!wanted.has(destination) && this.options.isPeerWanted(kept.neighbor)) wanted.set(destination, kept);
    }
    if (sameRoutes(wanted, this.#handedOver)) return;
    this.#handedOver = wanted;
    this.options.routes.setRoutes(this.options.owner, [...wanted.values()].map((r) => r.route));
    this.options.logger.debug({ routes: wanted.size }, 'learned routes handed to route-sync');
  }
}

/** The listing, with the events' word for the destinations they changed (present or withdrawn). */
function mergeChanged(listed: Map<string, LearnedPath>, byEvents: ReadonlyMap<string, LearnedPath>, changed: ReadonlySet<string>): Map<string, LearnedPath> {
  for (const destination of changed) {
    const path = byEvents.get(destination);
    if (path) listed.set(destination, path);
    else listed.delete(destination);
  }
  return listed;
}

function sameRoutes(a: ReadonlyMap<string, LearnedRoute>, b: ReadonlyMap<string, LearnedRoute>): boolean {
  if (a.size !== b.size) return false;
  for (const [destination, { route }] of a) {
    const other = b.get(destination)?.route;
    if (!other || other.gateway !== route.gateway || other.device !== route.device) return false;
  }
  return true;
}
