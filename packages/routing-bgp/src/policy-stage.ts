import type { V1Node } from '@kubernetes/client-node';
import { SyncFailures } from '@kube-router/controller';
import type { Logger } from 'pino';
import { buildRoutingPolicy, nodePolicySettings, PolicyReconciler, type PolicyGobgp } from './policies.js';
import type { ReflectorRole } from './route-reflector.js';
import type { RoutingCluster, RoutingSettings } from './settings.js';

export interface PolicyStageOptions {
  nodeName: string;
  cluster: Pick<RoutingCluster, 'warn'>;
  settings: Pick<RoutingSettings, 'enableIbgp' | 'advertisePodCidr' | 'overrideNextHop'>;
  gobgp: () => PolicyGobgp;
  role: () => ReflectorRole;
  /** The VIPs gobgpd announces now, also those being withdrawn. */
  announcedVips(podCidrs: ReadonlySet<string>): Promise<ReadonlySet<string>>;
  /** The external peers' sessions this controller holds. */
  externalPeers(): Iterable<string>;
  logger: Logger;
}

export interface PolicyInput {
  node: V1Node;
  podCidrs: readonly string[];
  /** The VIPs this sync wants announced; undefined when they could not be planned. */
  vips?: ReadonlySet<string>;
  /** Every address that counts as internal: the mesh's. */
  mesh: ReadonlySet<string>;
  /** The neighbor address of every peer gobgpd has, as this sync sees them (its PeerTable, after the peer stages). */
  peers: readonly string[];
}

/**
 * kube-router's import and export policies, from this node's annotations, its peers and what it announces. A route
 * reflector server gets none, as in kube-router: it must pass on what its clients send.
 */
export class PolicyStage {
  readonly #reconciler: PolicyReconciler;

  constructor(private readonly options: PolicyStageOptions) {
    this.#reconciler = new PolicyReconciler(options.gobgp);
  }

  /** Whether gobgpd has been given the policies since it last started. */
  get applied(): boolean {
    return this.#reconciler.applied;
  }

  /** gobgpd's accept-all default would export everything to a new session: no peer before a policy. */
  requireApplied(): void {
    if (!this.applied) {
      throw new Error('policy not applied: no BGP peer is added until gobgpd has the import and export policies (see the policies failure)');
    }
  }

  /** gobgpd restarted: it has no policy. */
  forget(): void {
    this.#reconciler.forget();
  }

  async sync({ node, podCidrs, vips = new Set(), mesh, peers }: PolicyInput): Promise<void> {
    const { settings, nodeName } = this.options;
    if (this.options.role().kind === 'server') {
      await this.#reconciler.reconcile(undefined);
      return;
    }
    const failures = new SyncFailures();
    const { settings: nodePolicy, problems } = nodePolicySettings(node);
    for (const { annotation, message } of problems) {
      this.options.cluster.warn(node, 'InvalidAnnotation', `${annotation}: ${message}`);
      failures.add(`node/${nodeName}/${annotation}`, new Error(`${annotation}: ${message}`));
    }
    // Internal are the mesh's addresses, from the Nodes (not from what this process added: after an agent restart
    // with gobgpd still running, the first policy comes before the mesh stage adopts its peers). Every other peer
    // counts as external, also one added by hand with gobgp's CLI.
    const changed = await this.#reconciler.reconcile(
      buildRoutingPolicy({
        podCidrs,
        // A VIP being withdrawn stays exported until it is: gobgpd sends a withdrawal only through its export policy.
        vips: [...vips, ...(await this.options.announcedVips(new Set(podCidrs)))],
        internalPeers: mesh,
        externalPeers: [...this.options.externalPeers(), ...peers].filter((address) => !mesh.has(address)),
        enableIbgp: settings.enableIbgp,
        advertisePodCidr: settings.advertisePodCidr,
        overrideNextHop: settings.overrideNextHop,
        node: nodePolicy,
      }),
    );
    if (changed) this.options.logger.info({ vips: vips.size, peers: peers.length }, 'BGP import and export policies applied');
    failures.throwIfAny();
  }
}
