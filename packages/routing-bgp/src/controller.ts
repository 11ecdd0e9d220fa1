import type { V1Node } from '@kubernetes/client-node';
import { createSyncController, SyncFailures, type Controller, type ControllerStartContext, type PluginContext, type SyncContext } from '@kube-router/controller';
import { nodePodCidrs } from '@kube-router/kube';
import { IpRoute2, type IpFamily } from '@kube-router/netfilter';
import { BestPathWatch } from './best-path-watch.js';
import { GobgpEngine, wantedListenAddresses } from './engine.js';
import { ExternalPeerStage } from './external-peer-stage.js';
import { HostNetworking } from './host-networking.js';
import { InternalPeerStage } from './internal-peer-stage.js';
import { LearnedRoutes } from './learned-routes.js';
import { familiesOf, routedAddresses } from './local-node.js';
import { createRoutingMetrics, PeerInfoRefresh, type RoutingMetrics } from './metrics.js';
import { familyOf, ownAsn, type NodeAddresses } from './nodes.js';
import { isLocalPath } from './paths.js';
import { PeerTable } from './peer-sync.js';
import type { PeeringSettings } from './peering.js';
import { PodCidrAdvertiser } from './pod-cidr-advertiser.js';
import { PolicyStage } from './policy-stage.js';
import { ReflectorRoleState } from './route-reflector.js';
import type { RoutingCluster, RoutingDeps, RoutingSettings } from './settings.js';
import { ServiceVipStage } from './vip-stage.js';

/** The controller's name: its health check, the `controller` label of its sync metrics, the owner of its routes. */
export const ROUTING_BGP_CONTROLLER = 'routing-bgp';

/**
 * Pod routing over BGP. gobgpd is this controller's engine: supervised as a child process (or external), configured
 * over gRPC and reconciled level-triggered on every sync against its own RIB and peer table, so a restarted gobgpd is
 * simply brought back to the wanted state. Learned best paths go to route-sync as one set owned by this controller.
 */
export function createRoutingController(ctx: PluginContext, cluster: RoutingCluster, settings: RoutingSettings, deps: RoutingDeps): Controller {
  const routing = new BgpRouting(ctx, cluster, settings, deps);
  return createSyncController(ctx, {
    name: ROUTING_BGP_CONTROLLER,
    syncPeriodMs: settings.syncPeriodMs,
    ...(settings.minSyncIntervalMs !== undefined && { minSyncIntervalMs: settings.minSyncIntervalMs }),
    ...(settings.syncTimeoutMs !== undefined && { syncTimeoutMs: settings.syncTimeoutMs }),
    start: (startCtx) => routing.start(startCtx),
    stop: () => routing.stop(),
    sync: (syncCtx) => routing.sync(syncCtx),
  });
}

/** This node as one sync reads it. */
interface LocalNode {
  node: V1Node;
  addresses: NodeAddresses;
  localAsn: number;
  podCidrs: string[];
  podFamilies: IpFamily[];
}

/**
 * The stages of kube-router's routing sync, each an object with its own state, and the order a sync runs them in.
 * Every stage is attempted whatever the others did; their failures are joined.
 */
class BgpRouting {
  readonly #metrics: RoutingMetrics;
  readonly #ip: IpRoute2;
  readonly #host: HostNetworking;
  readonly #engine: GobgpEngine;
  readonly #learned: LearnedRoutes;
  readonly #watch: BestPathWatch;
  readonly #role = new ReflectorRoleState();
  readonly #podCidrs: PodCidrAdvertiser;
  readonly #vips: ServiceVipStage;
  readonly #policies: PolicyStage;
  readonly #internal: InternalPeerStage;
  readonly #external: ExternalPeerStage;
  readonly #peerInfo: PeerInfoRefresh;
  #requestSync: (reason: string) => void = () => undefined;
  readonly #unsubscribes: (() => void)[] = [];

  constructor(
    private readonly ctx: PluginContext,
    private readonly cluster: RoutingCluster,
    private readonly settings: RoutingSettings,
    deps: RoutingDeps,
  ) {
    const { logger, nodeName } = ctx;
    const { netns } = settings;
    const metrics = (this.#metrics = createRoutingMetrics(ctx.metrics.registry));
    const ip = (this.#ip = new IpRoute2({ runner: deps.runner, ...(netns && { netns }) }));
    this.#host = new HostNetworking({ runner: deps.runner, ip, ...(netns && { netns }), podNetwork: settings.podNetwork, logger });
    this.#engine = new GobgpEngine({
      ...settings,
      ...(deps.gobgp && { client: deps.gobgp }),
      ...(settings.manageGobgpd && {
        supervise: { binary: settings.gobgpdBinary, ...(netns && { netns }), onSpawn: () => this.#gobgpdSpawned() },
      }),
      logger,
    });
    const gobgp = () => this.#engine.client();
    // What most stages are given: their gobgpd, this node's name, the cluster's listers and event recorders.
    const common = { nodeName, cluster, gobgp, metrics, logger };
    this.#learned = new LearnedRoutes({
      owner: ROUTING_BGP_CONTROLLER,
      routes: deps.routes,
      gobgp,
      localPrefixes: async () =>
        (await ip.addresses()).flatMap((link) => link.addr_info.filter((a) => a.scope === 'global').map((a) => `${a.local}/${a.prefixlen}`)),
      isPeerWanted: (address) => this.#internal.wants(address) || this.#external.wants(address),
      restartGraceMs: settings.restartGraceMs,
      catchUp: () => this.#watch.reopen(),
      logger,
    });
    this.#watch = new BestPathWatch({
      gobgp,
      handlers: {
        onPaths: (paths) => {
          metrics.advertisementsReceived.inc(paths.filter((p) => !isLocalPath(p)).length);
          this.#learned.applyBestPathEvents(paths);
        },
        onSnapshot: (paths) => {
          metrics.advertisementsReceived.inc(paths.filter((p) => !isLocalPath(p)).length);
          this.#learned.applySnapshot(paths);
        },
        onPeerChange: () => void this.#peerInfo.request().catch((error: unknown) => logger.debug({ err: error }, 'peer metrics update failed')),
      },
      onLost: () => this.#requestSync('gobgp-watch-ended'),
      onEnd: () => this.#learned.watchEnded(),
      logger,
    });
    this.#podCidrs = new PodCidrAdvertiser(common);
    this.#vips = new ServiceVipStage({ ...common, flags: settings.vipFlags, validation: settings.vipValidation });
    this.#policies = new PolicyStage({
      ...common,
      settings,
      role: () => this.#role.current,
      announcedVips: (podCidrs) => this.#vips.announced(podCidrs),
      externalPeers: () => this.#external.owned,
    });
    const peering: PeeringSettings = {
      bgpPort: settings.bgpPort,
      holdTimeSeconds: settings.holdTimeSeconds,
      peerMultihopTtl: settings.peerMultihopTtl,
      ...(settings.gracefulRestart && { gracefulRestart: settings.gracefulRestart }),
    };
    const requirePolicy = () => this.#policies.requireApplied();
    this.#internal = new InternalPeerStage({
      ...common,
      settings,
      peering,
      role: () => this.#role.current,
      requirePolicy,
      syncTime: metrics.internalPeersSyncTime,
    });
    this.#external = new ExternalPeerStage({ ...common, configured: settings.peerRouters, peering, requirePolicy });
    this.#peerInfo = new PeerInfoRefresh(metrics.peerInfo, () => gobgp().listPeers(), (address) => this.#internal.owned.has(address));
  }

  async start(startCtx: ControllerStartContext): Promise<void> {
    this.#requestSync = startCtx.requestSync;
    this.#unsubscribes.push(
      this.cluster.onNodesChanged(() => this.#requestSync('nodes')),
      this.cluster.onServicesChanged(() => this.#requestSync('services')),
    );
    await this.#engine.start();
    if (this.#engine.supervised) {
      this.ctx.health.addReadinessCheck(`${ROUTING_BGP_CONTROLLER}/gobgpd`, () => this.#engine.notRunningReason());
    }
  }

  async stop(): Promise<void> {
    for (const unsubscribe of this.#unsubscribes) unsubscribe();
    this.#watch.stop();
    this.#learned.stop();
    await this.#engine.stop();
  }

  async sync({ signal }: SyncContext): Promise<void> {
    const end = this.#metrics.routesSyncTime.startTimer();
    try {
      const failures = new SyncFailures();
      const local = await this.#readLocalNode(failures);
      // Before BGP: pods on this node get addresses from the CNI file whether or not any peer is up.
      const { addresses, podCidrs, podFamilies } = local;
      await failures.attempt('pod-network', () => this.#host.syncPodNetwork(podCidrs, addresses.primary));
      await failures.attempt('pod-forwarding', () => this.#host.syncPodForwarding(podFamilies, addresses.primary));
      await this.#startBgp(local, failures);
      if (signal.aborted) throw signal.reason;
      await this.#syncBgp(local, failures);
      if (this.settings.enablePodEgress) {
        await failures.attempt('pod-egress', () => this.#host.syncPodEgress(this.cluster.nodes.list(), podFamilies));
      }
      await failures.attempt('learned-routes', () => this.#learned.relist());
      await failures.attempt('peer-metrics', () => this.#peerInfo.request());
      failures.throwIfAny(ROUTING_BGP_CONTROLLER);
    } finally {
      end();
    }
  }

  /** This node's addresses, ASN and pod CIDRs; without a usable address the whole sync fails, and says why. */
  async #readLocalNode(failures: SyncFailures): Promise<LocalNode> {
    const { nodeName } = this.ctx;
    const node = this.cluster.nodes.get(nodeName);
    if (!node) throw new Error(`node ${nodeName} is not in the API server (yet)`);
    const addresses = routedAddresses(node, this.settings.enabledFamilies, this.cluster.warn);
    if (this.settings.enabledFamilies?.ipv6) await this.#host.switchIpv6On();
    const localAsn = ownAsn(node, this.settings.nodesFullMesh, this.settings.clusterAsn);
    const podCidrs = (await failures.attempt(`node/${nodeName}/pod-cidrs`, () => nodePodCidrs(node))) ?? [];
    this.#learned.setNode(familiesOf(addresses), podCidrs);
    const podFamilies = [...new Set(podCidrs.map((c) => familyOf(c.split('/')[0]!) as IpFamily))];
    return { node, addresses, localAsn, podCidrs, podFamilies };
  }

  /** gobgpd answers and runs BGP; the best-path watch is open; the node's subnets are read for learned next hops. */
  async #startBgp({ node, addresses, localAsn }: LocalNode, failures: SyncFailures): Promise<void> {
    // Read when BGP starts (gobgpd cannot change its listeners while it runs); a bad value listens on the node's.
    const listenAddresses = await wantedListenAddresses({
      node,
      addresses,
      localAddresses: async () => (await this.#ip.addresses()).flatMap((link) => link.addr_info.map((a) => a.local)),
      warn: this.cluster.warn,
      failures,
    });
    const started = await failures.attempt('gobgpd', async () => {
      if ((await this.#engine.ensureBgp(addresses, localAsn, listenAddresses)) === 'started') this.#gobgpdReset();
      return true;
    });
    if (started) this.#watch.ensure();
    await failures.attempt('on-link-prefixes', () => this.#learned.refreshOnLinkPrefixes());
  }

  /** Announcements, peers and policies, in the order gobgpd needs them. */
  async #syncBgp({ node, addresses, localAsn, podCidrs }: LocalNode, failures: SyncFailures): Promise<void> {
    // The role first: the policies (none for a route reflector) and the mesh depend on it.
    await failures.attempt('route-reflector', () => this.#role.refresh(node, this.cluster.warn));
    await failures.attempt('pod-cidr-advertisement', () => this.#podCidrs.reconcile(addresses, podCidrs));
    const vips = await failures.attempt('vip-plan', () => this.#vips.plan(node, failures));
    // Both kinds of peer, planned before any stage uses them: the policies and both peer stages tell internal from
    // external by the Nodes' addresses.
    const mesh = (await failures.attempt('internal-peers/plan', () => this.#internal.plan(addresses, localAsn))) ?? this.#internal.unplanned();
    const external = this.#external.plan(node, addresses, mesh);
    // gobgpd's peers, listed once for the policies and both peer stages, when the first of them needs it; the stages
    // record their own changes in it. A failed listing fails each of them.
    let listing: Promise<PeerTable> | undefined;
    const peerTable = () =>
      (listing ??= PeerTable.list(this.#engine.client()).catch((error: unknown) => {
        // The next stage that needs it lists again rather than failing on this one's error.
        listing = undefined;
        throw error;
      }));
    const policyInput = async (internal: ReadonlySet<string>) => ({ node, podCidrs, vips, mesh: internal, peers: (await peerTable()).addresses });
    // A new gobgpd gets a policy before its first peer: no session may see gobgpd's accept-all default, since a path
    // exported by mistake is not withdrawn when a later policy filters it. Without one, the peer stages fail.
    if (!this.#policies.applied) await failures.attempt('policies', async () => this.#policies.sync(await policyInput(mesh.addresses)));
    if (this.settings.enableIbgp) await failures.attempt('internal-peers', async () => this.#internal.sync(mesh, external.addresses, await peerTable()));
    await failures.attempt('external-peers', async () => this.#external.sync(node, external, mesh, await peerTable()));
    // Policies after the peers (their sets name the peers just added) and before the VIPs: gobgpd exports a new path
    // only if the policy already lets it through, and applies a changed policy only to paths that change. The mesh as
    // it is now: the plan's peers and the sessions the mesh stage has not removed (yet).
    await failures.attempt('policies', async () => this.#policies.sync(await policyInput(this.#internal.current())));
    if (vips) await failures.attempt('vip-advertisement', () => this.#vips.reconcile(vips, new Set(podCidrs), addresses.byFamily));
  }

  /** gobgpd was given its global config anew: everything it knew is gone, and this sync adds it back. */
  #gobgpdReset(): void {
    this.#internal.forget();
    this.#external.forget();
    this.#vips.forget();
    this.#policies.forget();
    // Learned routes are kept a while: the new gobgpd needs time to relearn them.
    this.#learned.gobgpdRestarted();
    this.#watch.cancel();
  }

  /** The supervisor started a new gobgpd: it has no configuration until the next sync gives it back. */
  #gobgpdSpawned(): void {
    this.#watch.cancel();
    setTimeout(() => this.#requestSync('gobgpd-started'), 200);
  }
}
