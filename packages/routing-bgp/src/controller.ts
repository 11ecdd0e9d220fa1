import type { V1Node, V1Service } from '@kubernetes/client-node';
import {
  createSyncController,
  messageOf,
  SyncFailures,
  type Controller,
  type InjectedRoute,
  type PluginContext,
  type RouteSyncService,
} from '@kube-router/controller';
import type { ClusterLister, EndpointSliceLister, Lister } from '@kube-router/kube';
import { nodePodCidrs } from '@kube-router/kube';
import { IpRoute2, type CommandRunner, type IpFamily } from '@kube-router/netfilter';
import { BGP_LOCAL_ADDRESSES_ANNOTATION, bgpListenAddresses, planExternalPeers, type ExternalPeerPlan, type ExternalPeerSpec } from './external-peers.js';
import { GobgpClient, type Afi, type ApiPath, type GracefulRestartConfig } from './gobgp-api.js';
import { GobgpdSupervisor } from './gobgpd.js';
import { createRoutingMetrics, type RoutingMetrics } from './metrics.js';
import {
  AFI_OF,
  familyOf,
  generatedRouterId,
  nodeAddresses,
  ownAsn,
  enabledAddresses,
  missingFamilyProblem,
  onLinkPrefixContains,
  planInternalPeers,
  type Family,
  type NodeAddresses,
  type PeerPlan,
} from './nodes.js';
import { isLocalPath, isUnicast, learnedBestPaths, pathNextHop, pathPrefix, podCidrPath, type LearnedPath } from './paths.js';
import { OwnedPeers, type WantedPeer } from './peer-sync.js';
import { externalPeerConfigs, internalPeerConfigs, type PeeringSettings } from './peering.js';
import { PodEgress } from './pod-egress.js';
import { PodForwarding } from './pod-forwarding.js';
import { PodNetwork } from './pod-network.js';
import { buildRoutingPolicy, nodePolicySettings, PolicyReconciler } from './policies.js';
import { reflectorRole, type ReflectorRole } from './route-reflector.js';
import { isVipPath, planServiceVips, VipAdvertiser, type VipAddressValidation, type VipFlags } from './vips.js';

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
  /** --enable-ipv4 / --enable-ipv6: the node must have an address of each enabled family; IPv6 is switched on. */
  enabledFamilies?: Readonly<Record<'ipv4' | 'ipv6', boolean>>;
  /** --cluster-asn: every node's ASN in a full mesh (without one, each node's kube-router.io/node.asn). */
  clusterAsn: number;
  /** --nodes-full-mesh. */
  nodesFullMesh: boolean;
  /** --enable-ibgp. */
  enableIbgp: boolean;
  /** --advertise-pod-cidr: this node's pod CIDRs go to external peers too (the mesh always gets them). */
  advertisePodCidr: boolean;
  /** --advertise-cluster-ip, --advertise-external-ip, --advertise-loadbalancer-ip. */
  vipFlags: VipFlags;
  /** --strict-external-ip-validation with its ranges; undefined announces every externalIP and LoadBalancer IP. */
  vipValidation?: VipAddressValidation;
  /** --override-nexthop: paths sent to external peers carry this node's session address as next hop. */
  overrideNextHop: boolean;
  /** --enable-pod-egress. */
  enablePodEgress: boolean;
  /**
   * The node side of pod networking: kube-bridge, the CNI file (--enable-cni gives the file, --auto-mtu the MTU) and
   * the forwarding rules. Left out only where a stand-in for the kernel has none of it.
   */
  podNetwork?: { cniConfFile?: string; autoMtu: boolean };
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
  /** --peer-router-ips and friends: when any, the Node's peer annotations are not read (kube-router). */
  peerRouters: readonly ExternalPeerSpec[];
  /** --peer-router-multihop-ttl (external peers, above 1 only). */
  peerMultihopTtl: number;
  /** --bgp-graceful-restart with its times; undefined when off. */
  gracefulRestart?: GracefulRestartConfig;
}

export interface RoutingCluster {
  nodes: ClusterLister<V1Node>;
  onNodesChanged(handler: () => void): () => void;
  /** Records a Warning event on a Node; never throws. */
  warn(node: V1Node, reason: string, message: string): void;
  /** Services and their EndpointSlices: the VIPs this node announces. */
  services: Lister<V1Service>;
  endpointSlices: Pick<EndpointSliceLister, 'listForService' | 'hasSynced'>;
  onServicesChanged(handler: () => void): () => void;
  /** Records a Warning event on a Service; never throws. */
  warnService(service: V1Service, reason: string, message: string): void;
}

export interface RoutingDeps {
  routes: RouteSyncService;
  runner: CommandRunner;
  /** gobgpd's API client; by default one for settings.apiTarget (a unit test gives a stand-in). */
  gobgp?: GobgpClient;
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
  const podNetwork = settings.podNetwork && new PodNetwork({ ip, logger, ...settings.podNetwork });
  let ipv6SwitchedOn = false;
  const podForwarding = settings.podNetwork && new PodForwarding({ runner: deps.runner, ip, netns: settings.netns });
  const podEgress = new PodEgress({ runner: deps.runner, ...(settings.netns && { netns: settings.netns }) });
  let client: GobgpClient | undefined;
  let supervisor: GobgpdSupervisor | undefined;
  let requestSync: (reason: string) => void = () => undefined;
  let unsubscribe: (() => void) | undefined;
  let unsubscribeServices: (() => void) | undefined;
  let stopped = false;

  /** The internal peers this controller added and has not yet removed (a failed deletion stays here). */
  const internalPeers = new Set<string>();
  /**
   * The external peers (--peer-router-ips, kube-router.io/peers and the per-field peer annotations) this controller
   * added and has not yet removed.
   */
  const externalPeers = new Set<string>();
  const ownedInternalPeers = new OwnedPeers(internalPeers, 'internal', logger);
  const ownedExternalPeers = new OwnedPeers(externalPeers, 'external', logger);
  const peering: PeeringSettings = {
    bgpPort: settings.bgpPort,
    holdTimeSeconds: settings.holdTimeSeconds,
    peerMultihopTtl: settings.peerMultihopTtl,
    ...(settings.gracefulRestart && { gracefulRestart: settings.gracefulRestart }),
  };
  /** This node's route reflection role; kept when its annotation stops parsing, so the topology does not flip. */
  let role: ReflectorRole = { kind: 'none' };
  /** On-link prefixes of this node, refreshed every sync: a learned next hop in one of them gets a direct route. */
  let onLinkPrefixes: string[] = [];
  let self: { addresses: NodeAddresses; podCidrs: string[] } | undefined;
  /** What was last handed to route-sync, with the neighbor each route was learned from. */
  let handedOver = new Map<string, LearnedRoute>();
  /** The addresses of the internal peers the last peer plan wanted (kept while some Node address does not parse). */
  let desiredPeers = new Set<string>();
  /** The addresses of the external peers the last plan wanted (kept while some annotation does not parse). */
  let desiredExternalPeers = new Set<string>();
  /**
   * What had been handed over when gobgpd last restarted: kept in the set until `restartGraceMs` has passed (or a peer
   * withdraws the destination explicitly), so that traffic keeps its routes while the new gobgpd relearns them.
   */
  let retained = new Map<string, LearnedRoute>();
  let graceTimer: NodeJS.Timeout | undefined;
  let cancelWatch: (() => void) | undefined;
  let watchRetry: NodeJS.Timeout | undefined;

  const gobgp = (): GobgpClient => {
    client ??= deps.gobgp ?? new GobgpClient({
      target: settings.apiTarget,
      callTimeoutMs: settings.apiTimeoutMs,
      ...(settings.protoDir && { protoDir: settings.protoDir }),
    });
    return client;
  };

  const vipAdvertiser = new VipAdvertiser(gobgp, ({ prefix, change }) => {
    metrics.advertisementsSent.inc({ type: change === 'advertised' ? 'advertise-vip' : 'withdraw-vip' });
    logger.info({ vip: prefix }, change === 'advertised' ? 'advertising Service VIP' : 'withdrew Service VIP');
  });
  const policyReconciler = new PolicyReconciler(gobgp);

  /**
   * The VIPs this node announces; a Service with a bad annotation or address gets a Warning event and is a failure.
   * Undefined until Services and EndpointSlices are listed: an empty cache must not withdraw every VIP.
   */
  const planVips = (me: V1Node, failures: SyncFailures): Set<string> | undefined => {
    if (!cluster.services.hasSynced() || !cluster.endpointSlices.hasSynced()) {
      failures.add('vip-advertisement', new Error('Services and EndpointSlices are not listed yet: the announced VIPs are left as they are'));
      return undefined;
    }
    const plan = planServiceVips({
      services: cluster.services.list(),
      slicesFor: (namespace, name) => cluster.endpointSlices.listForService(namespace, name),
      nodeName: ctx.nodeName,
      nodeAddresses: (me.status?.addresses ?? []).map((a) => a.address),
      flags: settings.vipFlags,
      ...(settings.vipValidation && { validation: settings.vipValidation }),
    });
    for (const { service, reason, message } of plan.problems) {
      cluster.warnService(service, reason, message);
      failures.add(`service/${service.metadata?.namespace}/${service.metadata?.name}`, new Error(message));
    }
    for (const { service, reason, message } of plan.refused) cluster.warnService(service, reason, message);
    return plan.advertise;
  };

  /** kube-router's import and export policies, from this node's annotations, its peers and what it announces. */
  const syncPolicies = async (me: V1Node, podCidrs: readonly string[], vips: ReadonlySet<string> = new Set(), mesh: ReadonlySet<string> = new Set()): Promise<void> => {
    const failures = new SyncFailures();
    if (role.kind === 'server') {
      // kube-router gives a route reflector server no policy: it must pass on what its clients send.
      await policyReconciler.reconcile(undefined);
      return;
    }
    const { settings: nodePolicy, problems } = nodePolicySettings(me);
    for (const { annotation, message } of problems) {
      cluster.warn(me, 'InvalidAnnotation', `${annotation}: ${message}`);
      failures.add(`node/${ctx.nodeName}/${annotation}`, new Error(`${annotation}: ${message}`));
    }
    // Internal are the mesh's addresses, from the Nodes (not from what this process added: after an agent restart
    // with gobgpd still running, the first policy comes before the mesh stage adopts its peers). Every other peer
    // counts as external, also one added by hand with gobgp's CLI.
    const peers = (await gobgp().listPeers()).map((p) => p.conf?.neighborAddress ?? '').filter(Boolean);
    const changed = await policyReconciler.reconcile(
      buildRoutingPolicy({
        podCidrs,
        // A VIP being withdrawn stays exported until it is: gobgpd sends a withdrawal only through its export policy.
        vips: [...vips, ...(await vipAdvertiser.announced(new Set(podCidrs)))],
        internalPeers: mesh,
        externalPeers: [...externalPeers, ...peers].filter((address) => !mesh.has(address)),
        enableIbgp: settings.enableIbgp,
        advertisePodCidr: settings.advertisePodCidr,
        overrideNextHop: settings.overrideNextHop,
        node: nodePolicy,
      }),
    );
    if (changed) logger.info({ vips: vips.size, peers: peers.length }, 'BGP import and export policies applied');
    failures.throwIfAny();
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
      if (!wanted.has(destination) && (desiredPeers.has(kept.neighbor) || desiredExternalPeers.has(kept.neighbor))) wanted.set(destination, kept);
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
  const ensureGlobal = async (addresses: NodeAddresses, localAsn: number, listenAddresses: readonly string[] | undefined): Promise<void> => {
    const current = await gobgp().getBgp();
    if (current && current.asn !== 0) {
      if (current.asn !== localAsn) {
        throw new Error(`gobgpd runs with ASN ${current.asn}, wanted ${localAsn}: restart the agent to change the ASN`);
      }
      return;
    }
    // gobgpd cannot change its listeners while it runs: better not start than start on the wrong addresses.
    if (!listenAddresses) throw new Error(`BGP not started: the addresses of ${BGP_LOCAL_ADDRESSES_ANNOTATION} could not be checked`);
    const routerId = resolveRouterId(settings.routerId, addresses);
    await gobgp().startBgp({
      asn: localAsn,
      routerId,
      listenPort: settings.bgpPort,
      listenAddresses: [...listenAddresses],
      ...(settings.gracefulRestart && { gracefulRestart: settings.gracefulRestart }),
    });
    logger.info({ asn: localAsn, routerId, port: settings.bgpPort, listenAddresses, gracefulRestart: Boolean(settings.gracefulRestart) }, 'BGP started in gobgpd');
    // Everything gobgpd knew is gone: peers and paths are re-added by this sync, learned routes are kept a while.
    ownedInternalPeers.forget();
    ownedExternalPeers.forget();
    vipAdvertiser.forget();
    policyReconciler.forget();
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
        // Host routes other than pod CIDRs are Service VIPs: the vip-advertisement stage's.
        if (wanted.has(prefix) || isVipPath(path, new Set(podCidrs))) continue;
        await failures.attempt(`pod-cidr/${prefix}`, async () => {
          await gobgp().deletePath(path);
          logger.info({ cidr: prefix }, 'withdrew pod CIDR');
        });
      }
    }
    failures.throwIfAny();
  };

  /** This node's route reflector role from its annotations; a bad value warns and keeps the previous role. */
  const refreshReflectorRole = (me: V1Node): void => {
    try {
      role = reflectorRole(me);
    } catch (error) {
      cluster.warn(me, 'InvalidRouteReflectorAnnotation', `keeping route reflector role ${role.kind}: ${messageOf(error)}`);
      throw error;
    }
  };

  /**
   * The mesh this node wants, from the Nodes: its peers' configurations and every address that counts as internal.
   * Computed once per sync, before any stage: the policies and both peer stages classify peers by it.
   */
  const planMesh = (addresses: NodeAddresses, localAsn: number): MeshPlan => {
    if (!settings.enableIbgp) return { wanted: [], problems: [], addresses: new Set() };
    const plan = planInternalPeers({
      selfName: ctx.nodeName,
      self: addresses,
      localAsn,
      fullMesh: settings.nodesFullMesh,
      nodes: cluster.nodes.list(),
    });
    const { wanted, skipped } = internalPeerConfigs({
      peers: plan.peers,
      role,
      nodeOf: (name) => cluster.nodes.get(name),
      localAddress: addresses.primary,
      settings: peering,
    });
    if (skipped.length > 0) logger.debug({ skipped }, 'nodes not peered with');
    // With Nodes unreadable, the peers wanted before stay wanted (their deletion is deferred by the stage).
    desiredPeers = new Set([...wanted.map((p) => p.config.neighborAddress), ...(plan.problems.length > 0 ? desiredPeers : [])]);
    // Still internal: a mesh session not yet removed (its deletion deferred or failed).
    return { wanted, problems: plan.problems, addresses: new Set([...desiredPeers, ...internalPeers]) };
  };

  /** gobgpd's accept-all default would export everything to a new session: no peer before a policy. */
  const requirePolicy = (): void => {
    if (!policyReconciler.applied) {
      throw new Error('policy not applied: no BGP peer is added until gobgpd has the import and export policies (see the policies failure)');
    }
  };

  const syncInternalPeers = async (mesh: MeshPlan, externalAddresses: ReadonlySet<string>): Promise<void> => {
    const end = metrics.internalPeersSyncTime.startTimer();
    try {
      requirePolicy();
      const failures = new SyncFailures();
      for (const problem of mesh.problems) {
        const node = cluster.nodes.get(problem.node);
        if (node) cluster.warn(node, 'InvalidNodeAddress', `not peering with node ${problem.node}: ${problem.error.message}`);
        failures.add(`node/${problem.node}`, problem.error);
      }
      const existing = new Map((await gobgp().listPeers()).map((p) => [p.conf?.neighborAddress ?? '', p]));
      // A Node whose address did not parse may be one of the peers no longer wanted: a transient outage of its
      // address must not tear down a working session, so no peer is removed until every Node reads cleanly again.
      const deferred = await ownedInternalPeers.reconcile({
        client: gobgp(),
        wanted: mesh.wanted,
        existing,
        failures,
        deferDeletions: mesh.problems.length > 0,
        ownedElsewhere: (address) => externalAddresses.has(address),
      });
      if (deferred.length > 0) {
        logger.warn({ deferred, nodes: mesh.problems.map((p) => p.node) }, 'peer deletions deferred: some Node addresses do not parse');
      }
      failures.throwIfAny();
    } finally {
      end();
    }
  };

  /**
   * The external peers: --peer-router-* when given, else this Node's kube-router.io/peers or per-field peer
   * annotations. A bad entry gets a Warning event on the Node and fails the stage; the other peers are configured.
   * While an annotation entry does not parse, no external peer is removed (the bad one may be a peer that works
   * today); a permanent mistake (a duplicate, a Node's address, a family without a local address) defers nothing.
   */
  const syncExternalPeers = async (me: V1Node, plan: ExternalPeerPlan, mesh: MeshPlan): Promise<void> => {
    requirePolicy();
    const failures = new SyncFailures();
    const problems = [...plan.problems];
    const peers = plan.peers.filter((peer) => {
      if (!mesh.addresses.has(peer.address)) return true;
      problems.push(new Error(`${peer.source}: peer ${peer.address} is a Node of the cluster, already an internal peer`));
      return false;
    });
    for (const problem of problems) failures.add(`node/${ctx.nodeName}/external-peers`, problem);
    if (problems.length > 0) {
      cluster.warn(
        me,
        'InvalidExternalPeer',
        `${problems.length === 1 ? 'an external BGP peer entry is' : `${problems.length} external BGP peer entries are`} not used` +
          ` (the other peers are configured): ${problems.map((p) => p.message).join('; ')}`,
      );
    }
    desiredExternalPeers = new Set([...peers.map((p) => p.address), ...(plan.incomplete ? desiredExternalPeers : [])]);
    const existing = new Map((await gobgp().listPeers()).map((p) => [p.conf?.neighborAddress ?? '', p]));
    const deferred = await ownedExternalPeers.reconcile({
      client: gobgp(),
      wanted: externalPeerConfigs(peers, peering),
      existing,
      failures,
      deferDeletions: plan.incomplete,
      // An address that became a Node's is the mesh stage's now: its session is not deleted.
      ownedElsewhere: (address) => mesh.addresses.has(address),
    });
    if (deferred.length > 0) logger.warn({ deferred }, 'external peer deletions deferred: some peer annotations do not parse');
    failures.throwIfAny();
  };

  /**
   * Where gobgpd listens: kube-router.io/bgp-local-addresses, checked against this node's addresses, else (also when
   * the annotation is bad: a Warning and a failure) the node's own address of each family, as kube-router listens by
   * default. Undefined when the annotation could not be checked (`ip` failed): BGP is then not started this sync.
   */
  const wantedListenAddresses = async (me: V1Node, addresses: NodeAddresses, failures: SyncFailures): Promise<string[] | undefined> => {
    const nodeListen = Object.values(addresses.byFamily);
    if (me.metadata?.annotations?.[BGP_LOCAL_ADDRESSES_ANNOTATION] === undefined) return nodeListen;
    const local = await failures.attempt('bgp-local-addresses', async () => (await ip.addresses()).flatMap((link) => link.addr_info.map((a) => a.local)));
    if (!local) return undefined;
    try {
      return bgpListenAddresses(me, local);
    } catch (error) {
      cluster.warn(me, 'InvalidBgpLocalAddresses', `gobgpd listens on the node's addresses ${nodeListen.join(', ')}: ${messageOf(error)}`);
      failures.add('bgp-local-addresses', error instanceof Error ? error : new Error(String(error)));
      return nodeListen;
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
      unsubscribeServices = cluster.onServicesChanged(() => requestSync('services'));
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
        const running = supervisor;
        ctx.health.addReadinessCheck(`${ROUTING_BGP_CONTROLLER}/gobgpd`, () => running.notRunningReason());
      }
    },
    async stop() {
      stopped = true;
      unsubscribe?.();
      unsubscribeServices?.();
      clearTimeout(watchRetry);
      clearTimeout(handOverTimer);
      clearTimeout(graceTimer);
      cancelWatch?.();
      client?.close();
      // With graceful restart, gobgpd must not end its sessions with a Cease (SIGTERM makes it deconfigure every
      // peer): killed, it just drops the connections, and its peers keep our routes for the restart time.
      await supervisor?.stop(settings.gracefulRestart ? { signal: 'SIGKILL' } : {});
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
        const familyProblem = settings.enabledFamilies && missingFamilyProblem(addresses, settings.enabledFamilies);
        if (familyProblem) {
          // As kube-router, which then does not start its routing controller: the flags promise a family the node lacks.
          cluster.warn(me, 'InvalidNodeAddress', `cannot route pods: ${familyProblem}`);
          throw new Error(`node ${ctx.nodeName}: ${familyProblem}`);
        }
        if (settings.enabledFamilies) addresses = enabledAddresses(addresses, settings.enabledFamilies);
        if (settings.enabledFamilies?.ipv6 && !ipv6SwitchedOn) {
          // kube-router turns IPv6 on for the node (net.ipv6.conf.all.disable_ipv6=0) when it is enabled, and only logs
          // a failure (a kernel booted with ipv6.disable=1 has no such switch): so here, once per process until it works.
          try {
            await deps.runner.run({ command: 'sysctl', args: ['-q', '-w', 'net.ipv6.conf.all.disable_ipv6=0'], timeoutMs: 10_000, ...(settings.netns && { netns: settings.netns }) });
            ipv6SwitchedOn = true;
          } catch (error) {
            logger.warn({ err: error }, 'cannot switch IPv6 on (net.ipv6.conf.all.disable_ipv6=0) although --enable-ipv6 is set');
          }
        }
        const localAsn = ownAsn(me, settings.nodesFullMesh, settings.clusterAsn);
        const podCidrs = (await failures.attempt(`node/${ctx.nodeName}/pod-cidrs`, () => nodePodCidrs(me))) ?? [];
        self = { addresses, podCidrs };
        // Before BGP: pods on this node get addresses from the CNI file whether or not any peer is up.
        if (podNetwork) await failures.attempt('pod-network', () => podNetwork.sync(podCidrs, addresses.primary));
        const podFamilies = [...new Set(podCidrs.map((c) => familyOf(c.split('/')[0]!) as IpFamily))];
        if (podForwarding) await failures.attempt('pod-forwarding', () => podForwarding.ensure(podFamilies, addresses.primary));

        // Read when BGP starts (gobgpd cannot change its listeners while it runs); a bad value listens on the node's.
        const listenAddresses = await wantedListenAddresses(me, addresses, failures);
        const started = await failures.attempt('gobgpd', async () => {
          if (supervisor && !supervisor.pid) throw new Error('gobgpd is not running (it exited and is being restarted)');
          await gobgp().waitReady(Math.min(settings.apiTimeoutMs, 2_000));
          await ensureGlobal(addresses, localAsn, listenAddresses);
          return true;
        });
        if (started) watch();
        await failures.attempt('on-link-prefixes', refreshOnLinkPrefixes);
        if (signal.aborted) throw signal.reason;

        // The stages of kube-router's routing sync: each is attempted, whatever the others did.
        // The role first: the policies (none for a route reflector) and the mesh depend on it.
        await failures.attempt('route-reflector', () => refreshReflectorRole(me));
        // Always announced: the export policy decides who gets them (--advertise-pod-cidr: external peers too).
        await failures.attempt('pod-cidr-advertisement', () => advertisePodCidrs(addresses, podCidrs));
        const vips = await failures.attempt('vip-plan', () => planVips(me, failures));
        // Both kinds of peer, planned before any stage uses them: the policies and both peer stages tell internal
        // from external by the Nodes' addresses.
        const emptyMesh: MeshPlan = { wanted: [], problems: [], addresses: new Set(internalPeers) };
        const mesh = (await failures.attempt('internal-peers/plan', () => planMesh(addresses, localAsn))) ?? emptyMesh;
        const external = planExternalPeers({ configured: settings.peerRouters, node: me, self: addresses });
        const externalAddresses = new Set(external.peers.map((p) => p.address).filter((address) => !mesh.addresses.has(address)));
        // A new gobgpd gets a policy before its first peer: no session may see gobgpd's accept-all default, since a
        // path exported by mistake is not withdrawn when a later policy filters it. Without one, the peer stages fail.
        if (!policyReconciler.applied) await failures.attempt('policies', () => syncPolicies(me, podCidrs, vips, mesh.addresses));
        if (settings.enableIbgp) await failures.attempt('internal-peers', () => syncInternalPeers(mesh, externalAddresses));
        await failures.attempt('external-peers', () => syncExternalPeers(me, external, mesh));
        // Policies after the peers (their sets name the peers just added) and before the VIPs: gobgpd exports a new
        // path only if the policy already lets it through, and applies a changed policy only to paths that change.
        // The mesh as it is now: the plan's peers and the sessions the mesh stage has not removed (yet).
        const meshNow = new Set([...desiredPeers, ...internalPeers]);
        await failures.attempt('policies', () => syncPolicies(me, podCidrs, vips, meshNow));
        if (vips) await failures.attempt('vip-advertisement', () => vipAdvertiser.reconcile(vips, new Set(podCidrs), addresses.byFamily));
        if (settings.enablePodEgress) {
          await failures.attempt('pod-egress', () => {
            const nodes = cluster.nodes.list();
            const allPodCidrs = nodes.flatMap((n) => tryOr(() => nodePodCidrs(n), []));
            const allAddresses = nodes.flatMap((n) => tryOr(() => Object.values(nodeAddresses(n).byFamily), []));
            return podEgress.ensure(allPodCidrs, allAddresses, podFamilies);
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

/** The mesh of one sync: the internal peers wanted, the Nodes that did not read, every address that is internal. */
interface MeshPlan {
  wanted: WantedPeer[];
  problems: PeerPlan['problems'];
  addresses: ReadonlySet<string>;
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
