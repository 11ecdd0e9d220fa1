import type { V1Node } from '@kubernetes/client-node';
import { SyncFailures } from '@kube-router/controller';
import type { Logger } from 'pino';
import { planExternalPeers, type ExternalPeerPlan, type ExternalPeerSpec } from './external-peers.js';
import type { GobgpClient } from './gobgp-api.js';
import type { MeshPlan } from './internal-peer-stage.js';
import type { NodeAddresses } from './nodes.js';
import { PeerStage, type PeerTable } from './peer-sync.js';
import { externalPeerConfigs, type PeeringSettings } from './peering.js';
import type { RoutingCluster } from './settings.js';

/** The external peers of one sync, with the addresses that are theirs (not a Node's: those are the mesh's). */
export interface ExternalPlan extends ExternalPeerPlan {
  addresses: ReadonlySet<string>;
}

export interface ExternalPeerStageOptions {
  nodeName: string;
  cluster: Pick<RoutingCluster, 'warn'>;
  /** --peer-router-*: when any, the Node's peer annotations are not read. */
  configured: readonly ExternalPeerSpec[];
  peering: PeeringSettings;
  gobgp: () => GobgpClient;
  /** Throws while gobgpd has no policy: its accept-all default would export everything to a new session. */
  requirePolicy(): void;
  logger: Logger;
}

/**
 * The external peers: --peer-router-* when given, else this Node's kube-router.io/peers or per-field peer
 * annotations. A bad entry gets a Warning event on the Node and fails the stage; the other peers are configured.
 * While an annotation entry does not parse, no external peer is removed (the bad one may be a peer that works
 * today); a permanent mistake (a duplicate, a Node's address, a family without a local address) defers nothing.
 */
export class ExternalPeerStage extends PeerStage {
  constructor(private readonly options: ExternalPeerStageOptions) {
    super('external', options.logger);
  }

  /** Planned before any stage runs: the policies and the mesh stage tell internal from external by it. */
  plan(node: V1Node, self: NodeAddresses, mesh: MeshPlan): ExternalPlan {
    const plan = planExternalPeers({ configured: this.options.configured, node, self });
    return { ...plan, addresses: new Set(plan.peers.map((p) => p.address).filter((address) => !mesh.addresses.has(address))) };
  }

  /** Adds and removes external sessions in gobgpd's `peers` (this sync's table, which records the changes). */
  async sync(node: V1Node, plan: ExternalPeerPlan, mesh: MeshPlan, peers: PeerTable): Promise<void> {
    this.options.requirePolicy();
    const failures = new SyncFailures();
    const problems = [...plan.problems];
    const wanted = plan.peers.filter((peer) => {
      if (!mesh.addresses.has(peer.address)) return true;
      problems.push(new Error(`${peer.source}: peer ${peer.address} is a Node of the cluster, already an internal peer`));
      return false;
    });
    for (const problem of problems) failures.add(`node/${this.options.nodeName}/external-peers`, problem);
    if (problems.length > 0) {
      this.options.cluster.warn(
        node,
        'InvalidExternalPeer',
        `${problems.length === 1 ? 'an external BGP peer entry is' : `${problems.length} external BGP peer entries are`} not used` +
          ` (the other peers are configured): ${problems.map((p) => p.message).join('; ')}`,
      );
    }
    this.want(wanted.map((p) => p.address), plan.incomplete);
    const deferred = await this.reconcile(this.options.gobgp(), {
      wanted: externalPeerConfigs(wanted, this.options.peering),
      existing: peers,
      failures,
      deferDeletions: plan.incomplete,
      // An address that became a Node's is the mesh stage's now: its session is not deleted.
      ownedElsewhere: (address) => mesh.addresses.has(address),
    });
    if (deferred.length > 0) this.options.logger.warn({ deferred }, 'external peer deletions deferred: some peer annotations do not parse');
    failures.throwIfAny();
  }
}
