import { SyncFailures } from '@kube-router/controller';
import type { Logger } from 'pino';
import type { Histogram } from 'prom-client';
import type { GobgpClient } from './gobgp-api.js';
import { planInternalPeers, type NodeAddresses, type PeerPlan } from './nodes.js';
import { PeerStage, type PeerTable, type WantedPeer } from './peer-sync.js';
import { internalPeerConfigs, type PeeringSettings } from './peering.js';
import type { ReflectorRole } from './route-reflector.js';
import type { RoutingCluster, RoutingSettings } from './settings.js';

/** The mesh of one sync: the internal peers wanted, the Nodes that did not read, every address that is internal. */
export interface MeshPlan {
  wanted: WantedPeer[];
  problems: PeerPlan['problems'];
  addresses: ReadonlySet<string>;
}

export interface InternalPeerStageOptions {
  nodeName: string;
  cluster: Pick<RoutingCluster, 'nodes' | 'warn'>;
  /** --enable-ibgp (without it the mesh is empty) and --nodes-full-mesh. */
  settings: Pick<RoutingSettings, 'enableIbgp' | 'nodesFullMesh'>;
  peering: PeeringSettings;
  gobgp: () => GobgpClient;
  /** This node's route reflector role: a client peers only with reflectors. */
  role: () => ReflectorRole;
  /** Throws while gobgpd has no policy: its accept-all default would export everything to a new session. */
  requirePolicy(): void;
  /** kube_router_controller_bgp_internal_peers_sync_time. */
  syncTime: Pick<Histogram, 'startTimer'>;
  logger: Logger;
}

/**
 * The iBGP mesh: a session with every other Node (or, for a route reflector client, with the reflectors). It owns the
 * sessions it added, and while some Node's address does not parse it removes none: that Node may be the very peer
 * that would go, and a transient outage of its address must not tear down a working session.
 */
export class InternalPeerStage extends PeerStage {
  constructor(private readonly options: InternalPeerStageOptions) {
    super('internal', options.logger);
  }

  /** The mesh as it is now: the plan's peers and the sessions this stage has not removed (yet). */
  current(): Set<string> {
    return new Set([...this.wanted, ...this.owned]);
  }

  /**
   * The mesh this node wants, from the Nodes: its peers' configurations and every address that counts as internal.
   * Computed once per sync, before any stage: the policies and both peer stages classify peers by it.
   */
  plan(addresses: NodeAddresses, localAsn: number): MeshPlan {
    const { cluster, peering, settings } = this.options;
    if (!settings.enableIbgp) return { wanted: [], problems: [], addresses: new Set() };
    const plan = planInternalPeers({
      selfName: this.options.nodeName,
      self: addresses,
      localAsn,
      fullMesh: settings.nodesFullMesh,
      nodes: cluster.nodes.list(),
    });
    const { wanted, skipped } = internalPeerConfigs({
      peers: plan.peers,
      role: this.options.role(),
      nodeOf: (name) => cluster.nodes.get(name),
      localAddress: addresses.primary,
      settings: peering,
    });
    if (skipped.length > 0) this.options.logger.debug({ skipped }, 'nodes not peered with');
    // With Nodes unreadable, the peers wanted before stay wanted (their deletion is deferred by `sync`).
    this.want(wanted.map((p) => p.config.neighborAddress), plan.problems.length > 0);
    // Still internal: a mesh session not yet removed (its deletion deferred or failed).
    return { wanted, problems: plan.problems, addresses: this.current() };
  }

  /** The mesh when it could not be planned: nothing wanted, and the sessions this stage holds still count as internal. */
  unplanned(): MeshPlan {
    return { wanted: [], problems: [], addresses: new Set(this.owned) };
  }

  /**
   * Adds and removes mesh sessions in gobgpd's `peers` (this sync's table, which records the changes);
   * `externalAddresses` are the external stage's, whose sessions it leaves alone. The stage's time
   * (kube_router_controller_bgp_internal_peers_sync_time) does not include the listing of the table.
   */
  async sync(mesh: MeshPlan, externalAddresses: ReadonlySet<string>, peers: PeerTable): Promise<void> {
    const end = this.options.syncTime.startTimer();
    try {
      this.options.requirePolicy();
      const failures = new SyncFailures();
      for (const problem of mesh.problems) {
        const node = this.options.cluster.nodes.get(problem.node);
        if (node) this.options.cluster.warn(node, 'InvalidNodeAddress', `not peering with node ${problem.node}: ${problem.error.message}`);
        failures.add(`node/${problem.node}`, problem.error);
      }
      const deferred = await this.reconcile(this.options.gobgp(), {
        wanted: mesh.wanted,
        existing: peers,
        failures,
        deferDeletions: mesh.problems.length > 0,
        ownedElsewhere: (address) => externalAddresses.has(address),
      });
      if (deferred.length > 0) {
        this.options.logger.warn({ deferred, nodes: mesh.problems.map((p) => p.node) }, 'peer deletions deferred: some Node addresses do not parse');
      }
      failures.throwIfAny();
    } finally {
      end();
    }
  }
}
