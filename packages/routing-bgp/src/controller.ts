import type { V1Node } from '@kubernetes/client-node';
import {
  createSyncController,
  messageOf,
  SyncFailures,
  type Controller,
  type InjectedRoute,
  type PluginContext,
  type RouteSyncService,
} from '@kube-router/controller';
import type { ClusterLister } from '@kube-router/kube';
import { nodePodCidrs } from '@kube-router/kube';
import { IpRoute2, type CommandRunner, type IpFamily } from '@kube-router/netfilter';
import { GobgpClient, type Afi, type ApiPath } from './gobgp-api.js';
import { GobgpdSupervisor } from './gobgpd.js';
import { createRoutingMetrics, type RoutingMetrics } from './metrics.js';
import {
  AFI_OF,
  familyOf,
  generatedRouterId,
  nodeAddresses,
  nodeAsn,
  onLinkPrefixContains,
  planInternalPeers,
  type DesiredPeer,
  type Family,
  type NodeAddresses,
} from './nodes.js';
import { isLocalPath, isUnicast, learnedBestPaths, pathNextHop, pathPrefix, podCidrPath, type LearnedPath } from './paths.js';
import { PodEgress } from './pod-egress.js';

/** The controller's name: its health check, the `controller` label of its sync metrics, the owner of its routes. */
export const ROUTING_BGP_CONTROLLER = 'routing-bgp';

export interface RoutingSettings {
  /** --routes-sync-period. */
  syncPeriodMs: number;
  minSyncIntervalMs?: number;
  syncTimeoutMs?: number;
  /** --bgp-port: where gobgpd listens and where it dials its peers. */
  bgpPort: number;
  /** --bgp-holdtime, seconds. */
  holdTimeSeconds: number;
  /** --router-id: an IPv4 address, `generate`, or undefined for this node's IPv4 address. */
  routerId?: string;
  /** --cluster-asn: this node's ASN unless its kube-router.io/node.asn says otherwise. */
  clusterAsn: number;
  /** --nodes-full-mesh. */
  nodesFullMesh: boolean;
  /** --enable-ibgp. */
  enableIbgp: boolean;
  /** --advertise-pod-cidr. */
  advertisePodCidr: boolean;
  /** --enable-pod-egress. */
  enablePodEgress: boolean;
  /** gobgpd's API: `host:port` (--gobgp-admin-address, --gobgp-admin-port) or `unix:///path`. */
  apiTarget: string;
  /** Runs and supervises gobgpd; false drives a gobgpd someone else runs at apiTarget. */
  manageGobgpd: boolean;
  gobgpdBinary: string;
  protoDir?: string;
  /** The network namespace gobgpd, `ip` and iptables run in; the agent itself stays where it is. */
  netns?: string;
  /** Deadline of each gobgp API call. */
  apiTimeoutMs: number;
  /** How long learned routes outlive a gobgpd restart before an empty RIB may withdraw them. */
  restartGraceMs: number;
}

export interface RoutingCluster {
  nodes: ClusterLister<V1Node>;
  onNodesChanged(handler: () => void): () => void;
  /** Records a Warning event on a Node; never throws. */
  warn(node: V1Node, reason: string, message: string): void;
}

export interface RoutingDeps {
  routes: RouteSyncService;
  runner: CommandRunner;
}

const FAMILIES: readonly Family[] = ['ipv4', 'ipv6'];

/**
 * Pod routing over BGP. gobgpd is this controller's engine: supervised as a child process (or external), configured
 * over gRPC and reconciled level-triggered on every sync against its own RIB and peer table, so a restarted gobgpd is
 * simply brought back to the wanted state. Learned best paths go to route-sync as one set owned by this controller.
 */
export function createRoutingController(
  ctx: PluginContext,
  cluster: RoutingCluster,
  settings: RoutingSettings,
  deps: RoutingDeps,
): Controller {
  const logger = ctx.logger;
  const metrics: RoutingMetrics = createRoutingMetrics(ctx.metrics.registry);
  const ip = new IpRoute2({ runner: deps.runner, ...(settings.netns && { netns: settings.netns }) });
  const podEgress = new PodEgress({ runner: deps.runner, ...(settings.netns && { netns: settings.netns }) });
  let client: GobgpClient | undefined;
  let supervisor: GobgpdSupervisor | undefined;
  let requestSync: (reason: string) => void = () => undefined;
  let unsubscribe: (() => void) | undefined;
  let stopped = false;

  /** The internal peers this controller added and has not yet removed (a failed deletion stays here). */
  const internalPeers = new Set<string>();
  /** On-link prefixes of this node, refreshed every sync: a learned next hop in one of them gets a direct route. */
  let onLinkPrefixes: string[] = [];
  let self: { addresses: NodeAddresses; podCidrs: string[] } | undefined;
  /** What was last handed to route-sync, with the neighbor each route was learned from. */
  let handedOver = new Map<string, LearnedRoute>();
  /** The addresses of the internal peers the last peer plan wanted. */
  let desiredPeers = new Set<string>();
  /**
   * What had been handed over when gobgpd last restarted: kept in the set until `restartGraceMs` has passed (or a peer
   * withdraws the destination explicitly), so that traffic keeps its routes while the new gobgpd relearns them.
   */
  let retained = new Map<string, LearnedRoute>();
  let graceTimer: NodeJS.Timeout | undefined;
  let cancelWatch: (() => void) | undefined;
  let watchRetry: NodeJS.Timeout | undefined;

  const gobgp = (): GobgpClient => {
    client ??= new GobgpClient({
      target: settings.apiTarget,
      callTimeoutMs: settings.apiTimeoutMs,
      ...(settings.protoDir && { protoDir: settings.protoDir }),
    });
    return client;
  };

  // The best paths peers sent, by destination: kept current by the watch's best-path events as they come, and replaced
  // by a full listing of gobgpd's RIB on every sync (level-triggered, in case an event was missed).
  let learned = new Map<string, LearnedPath>();
  let eventBatches = 0;
  let handOverTimer: NodeJS.Timeout | undefined;

  const applyBestPathEvents = (paths: readonly ApiPath[]): void => {
    eventBatches++;
    for (const path of paths) {
      if (!isUnicast(path, 'AFI_IP') && !isUnicast(path, 'AFI_IP6')) continue;
      const destination = pathPrefix(path);
      if (!destination) continue;
      const nextHop = pathNextHop(path);
      // A withdrawal, or our own path becoming best, ends what a peer taught us about the destination.
      if (path.isWithdraw || isLocalPath(path) || !nextHop) {
        learned.delete(destination);
        retained.delete(destination);
      }
      else learned.set(destination, { destination, nextHop, neighbor: path.neighborIp! });
    }
    // One hand-over per burst: a peer's 5,000 UPDATEs arrive as hundreds of events within milliseconds.
    handOverTimer ??= setTimeout(() => {
      handOverTimer = undefined;
      handOver();
    }, 20);
  };

  const relistLearnedPaths = async (): Promise<void> => {
    if (!self) return;
    for (let attempt = 0; ; attempt++) {
      const batchesBefore = eventBatches;
      const listed = new Map<string, LearnedPath>();
      const failures = new SyncFailures();
      for (const family of FAMILIES) {
        if (!self.addresses.byFamily[family]) continue;
        const afi = AFI_OF[family];
        const paths = await failures.attempt(`learned-routes/${family}`, () => gobgp().listGlobalPaths(afi));
        for (const path of learnedBestPaths((paths ?? []).filter((p) => isUnicast(p, afi)))) listed.set(path.destination, path);
      }
      // gobgpd unreachable: the routes handed over stay; the kernel keeps forwarding while gobgpd comes back.
      failures.throwIfAny('learned routes');
      // Events that arrived while listing may be older or newer than the listing: list again rather than guess.
      if (batchesBefore === eventBatches || attempt >= 2) {
        learned = listed;
        break;
      }
    }
    handOver();
  };

  const handOver = (): void => {
    if (!self || stopped) return;
    const onLink = new Map<string, boolean>();
    const wanted = new Map<string, LearnedRoute>();
    for (const path of learned.values()) {
      if (self.podCidrs.includes(path.destination)) continue;
      // kube-router without an overlay: only a next hop on this node's subnet gets a route; others are left to the
      // network's own routing.
      let direct = onLink.get(path.nextHop);
      if (direct === undefined) onLink.set(path.nextHop, (direct = onLinkPrefixContains(onLinkPrefixes, path.nextHop)));
      if (direct) wanted.set(path.destination, { route: { destination: path.destination, gateway: path.nextHop }, neighbor: path.neighbor });
    }
    for (const [destination, kept] of retained) {
      // Retained only while its peer is still wanted: a Node deleted during the grace loses its routes at once.
      if (!wanted.has(destination) && desiredPeers.has(kept.neighbor)) wanted.set(destination, kept);
    }
    if (!sameRoutes(wanted, handedOver)) {
      handedOver = wanted;
      deps.routes.setRoutes(ROUTING_BGP_CONTROLLER, [...wanted.values()].map((r) => r.route));
      logger.debug({ routes: wanted.size }, 'learned routes handed to route-sync');
    }
  };

  const watch = (): void => {
    if (stopped || cancelWatch) return;
    cancelWatch = gobgp().watchEvents({
      onPaths: (paths) => {
        metrics.advertisementsReceived.inc(paths.filter((p) => !isLocalPath(p)).length);
        applyBestPathEvents(paths);
      },
      onPeerChange: () => {
        void updatePeerMetrics().catch((error: unknown) => logger.debug({ err: error }, 'peer metrics update failed'));
      },
      onEnd: (error) => {
        cancelWatch = undefined;
        if (stopped) return;
        logger.debug({ err: error }, 'gobgp event watch ended; watching again');
        clearTimeout(watchRetry);
        watchRetry = setTimeout(() => requestSync('gobgp-watch-ended'), 1_000);
      },
    });
  };

  /** StartBgp unless gobgpd already runs its global config (a new or restarted process has none). */
  const ensureGlobal = async (addresses: NodeAddresses, localAsn: number): Promise<void> => {
    const current = await gobgp().getBgp();
    if (current && current.asn !== 0) {
      if (current.asn !== localAsn) {
        throw new Error(`gobgpd runs with ASN ${current.asn}, wanted ${localAsn}: restart the agent to change the ASN`);
      }
      return;
    }
    const routerId = resolveRouterId(settings.routerId, addresses);
    await gobgp().startBgp({ asn: localAsn, routerId, listenPort: settings.bgpPort });
    logger.info({ asn: localAsn, routerId, port: settings.bgpPort }, 'BGP started in gobgpd');
    // Everything gobgpd knew is gone: peers and paths are re-added by this sync, learned routes are kept a while.
    internalPeers.clear();
    learned = new Map();
    if (handedOver.size > 0) {
      retained = new Map(handedOver);
      clearTimeout(graceTimer);
      graceTimer = setTimeout(() => {
        retained = new Map();
        handOver();
      }, settings.restartGraceMs);
    }
    cancelWatch?.();
    cancelWatch = undefined;
  };

  const advertisePodCidrs = async (addresses: NodeAddresses, podCidrs: readonly string[]): Promise<void> => {
    const failures = new SyncFailures();
    for (const family of FAMILIES) {
      const afi: Afi = AFI_OF[family];
      const nextHop = addresses.byFamily[family];
      const wanted = new Map(podCidrs.filter((c) => familyOf(c.split('/')[0]!) === family).map((c) => [c, nextHop] as const));
      const paths = await failures.attempt(`advertisements/${family}`, () => gobgp().listGlobalPaths(afi));
      if (!paths) continue;
      const announced = new Map<string, ApiPath>();
      for (const path of paths) {
        const prefix = pathPrefix(path);
        if (prefix && isLocalPath(path) && !path.isWithdraw) announced.set(prefix, path);
      }
      for (const [cidr, hop] of wanted) {
        // Announced with the node's current address: nothing to do; with an old one: the new path replaces it.
        const current = announced.get(cidr);
        if (current && pathNextHop(current) === hop) continue;
        await failures.attempt(`pod-cidr/${cidr}`, async () => {
          if (!hop) throw new Error(`node has no ${family} address to announce ${cidr} with`);
          await gobgp().addPath(podCidrPath(cidr, hop));
          metrics.advertisementsSent.inc({ type: 'pod-route' });
          logger.info({ cidr, nextHop: hop }, 'advertising pod CIDR');
        });
      }
      for (const [prefix, path] of announced) {
        if (wanted.has(prefix)) continue;
        await failures.attempt(`pod-cidr/${prefix}`, async () => {
          await gobgp().deletePath(path);
          logger.info({ cidr: prefix }, 'withdrew pod CIDR');
        });
      }
    }
    failures.throwIfAny();
  };

  const syncInternalPeers = async (addresses: NodeAddresses, localAsn: number): Promise<void> => {
    const end = metrics.internalPeersSyncTime.startTimer();
    try {
      const failures = new SyncFailures();
      const plan = planInternalPeers({
        selfName: ctx.nodeName,
        self: addresses,
        localAsn,
        fullMesh: settings.nodesFullMesh,
        nodes: cluster.nodes.list(),
      });
      for (const problem of plan.problems) {
        const node = cluster.nodes.get(problem.node);
        if (node) cluster.warn(node, 'InvalidNodeAddress', `not peering with node ${problem.node}: ${problem.error.message}`);
        failures.add(`node/${problem.node}`, problem.error);
      }
      const wanted = new Map<string, DesiredPeer>(plan.peers.map((p) => [p.address, p]));
      // With Nodes unreadable, the peers wanted before stay wanted (their deletion is deferred below).
      desiredPeers = new Set([...wanted.keys(), ...(plan.problems.length > 0 ? desiredPeers : [])]);
      const existing = new Map((await gobgp().listPeers()).map((p) => [p.conf?.neighborAddress ?? '', p]));
      for (const peer of wanted.values()) {
        const current = existing.get(peer.address);
        await failures.attempt(`peer/${peer.node}/${peer.address}`, async () => {
          if (current && current.conf?.peerAsn === peer.asn) {
            internalPeers.add(peer.address);
            return;
          }
          if (current) await gobgp().deletePeer(peer.address);
          await gobgp().addPeer({
            neighborAddress: peer.address,
            peerAsn: peer.asn,
            localAddress: addresses.primary,
            remotePort: settings.bgpPort,
            holdTimeSeconds: settings.holdTimeSeconds,
            families: peer.families,
          });
          internalPeers.add(peer.address);
          logger.info({ node: peer.node, address: peer.address, asn: peer.asn }, 'added internal BGP peer');
        });
      }
      const gone = [...internalPeers].filter((address) => !wanted.has(address));
      if (plan.problems.length > 0 && gone.length > 0) {
        // A Node whose address did not parse may be one of these peers: a transient outage of its address must
        // not tear down a working session, so no peer is removed until every Node reads cleanly again.
        logger.warn({ deferred: gone, nodes: plan.problems.map((p) => p.node) }, 'peer deletions deferred: some Node addresses do not parse');
      } else {
        for (const address of gone) {
          await failures.attempt(`peer/${address}`, async () => {
            if (existing.has(address)) await gobgp().deletePeer(address);
            internalPeers.delete(address);
            logger.info({ address }, 'removed internal BGP peer');
          });
        }
      }
      failures.throwIfAny();
    } finally {
      end();
    }
  };

  const updatePeerMetrics = async (): Promise<void> => {
    const peers = await gobgp().listPeers();
    metrics.peerInfo.reset();
    for (const peer of peers) {
      const address = peer.conf?.neighborAddress ?? peer.state?.neighborAddress ?? '';
      metrics.peerInfo.set(
        {
          address,
          type: (peer.state?.type ?? '').replace(/^PEER_TYPE_/, '').toLowerCase() || (internalPeers.has(address) ? 'internal' : 'unknown'),
          asn: String(peer.conf?.peerAsn ?? peer.state?.peerAsn ?? 0),
          state: (peer.state?.sessionState ?? 'UNKNOWN').replace(/^SESSION_STATE_/, '').toLowerCase(),
        },
        1,
      );
    }
  };

  const refreshOnLinkPrefixes = async (): Promise<void> => {
    const links = await ip.addresses();
    onLinkPrefixes = links.flatMap((link) =>
      link.addr_info.filter((a) => a.scope === 'global').map((a) => `${a.local}/${a.prefixlen}`),
    );
  };

  return createSyncController(ctx, {
    name: ROUTING_BGP_CONTROLLER,
    syncPeriodMs: settings.syncPeriodMs,
    ...(settings.minSyncIntervalMs !== undefined && { minSyncIntervalMs: settings.minSyncIntervalMs }),
    ...(settings.syncTimeoutMs !== undefined && { syncTimeoutMs: settings.syncTimeoutMs }),
    async start(startCtx) {
      requestSync = startCtx.requestSync;
      unsubscribe = cluster.onNodesChanged(() => requestSync('nodes'));
      if (settings.manageGobgpd) {
        supervisor = new GobgpdSupervisor({
          binary: settings.gobgpdBinary,
          // gobgpd's --api-hosts and grpc-js read `host:port` and `unix:///path` alike.
          apiHosts: [settings.apiTarget],
          logger,
          ...(settings.netns && { netns: settings.netns }),
          onSpawn: () => {
            // The new process has no configuration; the next sync gives it back peers and paths.
            cancelWatch?.();
            cancelWatch = undefined;
            setTimeout(() => requestSync('gobgpd-started'), 200);
          },
        });
        await supervisor.start();
      }
    },
    async stop() {
      stopped = true;
      unsubscribe?.();
      clearTimeout(watchRetry);
      clearTimeout(handOverTimer);
      clearTimeout(graceTimer);
      cancelWatch?.();
      client?.close();
      await supervisor?.stop();
    },
    async sync({ signal }) {
      const end = metrics.routesSyncTime.startTimer();
      try {
        const failures = new SyncFailures();
        const me = cluster.nodes.get(ctx.nodeName);
        if (!me) throw new Error(`node ${ctx.nodeName} is not in the API server (yet)`);
        let addresses: NodeAddresses;
        try {
          addresses = nodeAddresses(me);
        } catch (error) {
          // Without its own address this node can neither peer nor announce: the whole sync fails, and says why.
          cluster.warn(me, 'InvalidNodeAddress', `cannot route pods: ${messageOf(error)}`);
          throw error;
        }
        const localAsn = nodeAsn(me) ?? settings.clusterAsn;
        const podCidrs = (await failures.attempt(`node/${ctx.nodeName}/pod-cidrs`, () => nodePodCidrs(me))) ?? [];
        self = { addresses, podCidrs };

        const started = await failures.attempt('gobgpd', async () => {
          if (supervisor && !supervisor.pid) throw new Error('gobgpd is not running (it exited and is being restarted)');
          await gobgp().waitReady(Math.min(settings.apiTimeoutMs, 2_000));
          await ensureGlobal(addresses, localAsn);
          return true;
        });
        if (started) watch();
        await failures.attempt('on-link-prefixes', refreshOnLinkPrefixes);
        if (signal.aborted) throw signal.reason;

        // The stages of kube-router's routing sync: each is attempted, whatever the others did.
        await failures.attempt('pod-cidr-advertisement', () => advertisePodCidrs(addresses, settings.advertisePodCidr ? podCidrs : []));
        // Service VIP advertisement (--advertise-cluster-ip and friends) is not built: nothing to announce or withdraw.
        await failures.attempt('vip-advertisement', () => undefined);
        // BGP import/export policies are not built: gobgpd's defaults (accept all from internal peers) apply.
        await failures.attempt('policies', () => undefined);
        if (settings.enableIbgp) await failures.attempt('internal-peers', () => syncInternalPeers(addresses, localAsn));
        if (settings.enablePodEgress) {
          await failures.attempt('pod-egress', () => {
            const nodes = cluster.nodes.list();
            const allPodCidrs = nodes.flatMap((n) => tryOr(() => nodePodCidrs(n), []));
            const allAddresses = nodes.flatMap((n) => tryOr(() => Object.values(nodeAddresses(n).byFamily), []));
            const families = [...new Set(podCidrs.map((c) => familyOf(c.split('/')[0]!) as IpFamily))];
            return podEgress.ensure(allPodCidrs, allAddresses, families);
          });
        }
        await failures.attempt('learned-routes', relistLearnedPaths);
        await failures.attempt('peer-metrics', updatePeerMetrics);
        failures.throwIfAny(ROUTING_BGP_CONTROLLER);
      } finally {
        end();
      }
    },
  });
}

/** Removes what the controller leaves on a node besides gobgpd itself: the pod egress rule and its sets. */
export async function removePodEgress(runner: CommandRunner, netns?: string): Promise<void> {
  await new PodEgress({ runner, ...(netns && { netns }) }).remove();
}

function resolveRouterId(configured: string | undefined, addresses: NodeAddresses): string {
  if (configured === 'generate') return generatedRouterId(addresses.primary);
  if (configured) return configured;
  const v4 = addresses.byFamily.ipv4;
  if (!v4) throw new Error('the node has no IPv4 address for a router id: set --router-id (an IPv4 address, or generate)');
  return v4;
}

interface LearnedRoute {
  route: InjectedRoute;
  /** The peer the route was learned from. */
  neighbor: string;
}

function sameRoutes(a: Map<string, LearnedRoute>, b: Map<string, LearnedRoute>): boolean {
  if (a.size !== b.size) return false;
  for (const [destination, { route }] of a) {
    const other = b.get(destination)?.route;
    if (!other || other.gateway !== route.gateway || other.device !== route.device) return false;
  }
  return true;
}

function tryOr<T>(f: () => T, fallback: T): T {
  try {
    return f();
  } catch {
    return fallback;
  }
}
