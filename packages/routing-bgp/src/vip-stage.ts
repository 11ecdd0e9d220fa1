import type { V1Node } from '@kubernetes/client-node';
import type { SyncFailures } from '@kube-router/controller';
import type { Logger } from 'pino';
import type { RoutingMetrics } from './metrics.js';
import type { Family } from './nodes.js';
import type { RoutingCluster } from './settings.js';
import { planServiceVips, VipAdvertiser, type VipAddressValidation, type VipFlags, type VipGobgp } from './vips.js';

export interface ServiceVipStageOptions {
  nodeName: string;
  cluster: Pick<RoutingCluster, 'services' | 'endpointSlices' | 'warnService'>;
  flags: VipFlags;
  validation?: VipAddressValidation;
  gobgp: () => VipGobgp;
  metrics: Pick<RoutingMetrics, 'advertisementsSent'>;
  logger: Logger;
}

/**
 * The Service VIPs this node announces: planned from Services and EndpointSlices (a Service with a bad annotation or
 * address gets a Warning event and is a failure), then added to and withdrawn from gobgpd's RIB.
 */
export class ServiceVipStage {
  readonly #advertiser: VipAdvertiser;

  constructor(private readonly options: ServiceVipStageOptions) {
    const { metrics, logger } = options;
    this.#advertiser = new VipAdvertiser(options.gobgp, ({ prefix, change }) => {
      metrics.advertisementsSent.inc({ type: change === 'advertised' ? 'advertise-vip' : 'withdraw-vip' });
      logger.info({ vip: prefix }, change === 'advertised' ? 'advertising Service VIP' : 'withdrew Service VIP');
    });
  }

  /**
   * The VIPs to announce. Undefined until Services and EndpointSlices are listed: an empty cache must not withdraw
   * every VIP.
   */
  plan(node: V1Node, failures: SyncFailures): Set<string> | undefined {
    const { cluster } = this.options;
    if (!cluster.services.hasSynced() || !cluster.endpointSlices.hasSynced()) {
      failures.add('vip-advertisement', new Error('Services and EndpointSlices are not listed yet: the announced VIPs are left as they are'));
      return undefined;
    }
    const plan = planServiceVips({
      services: cluster.services.list(),
      slicesFor: (namespace, name) => cluster.endpointSlices.listForService(namespace, name),
      nodeName: this.options.nodeName,
      nodeAddresses: (node.status?.addresses ?? []).map((a) => a.address),
      flags: this.options.flags,
      ...(this.options.validation && { validation: this.options.validation }),
    });
    for (const { service, reason, message } of plan.problems) {
      cluster.warnService(service, reason, message);
      failures.add(`service/${service.metadata?.namespace}/${service.metadata?.name}`, new Error(message));
    }
    for (const { service, reason, message } of plan.refused) cluster.warnService(service, reason, message);
    return plan.advertise;
  }

  /** What gobgpd announces now, also VIPs being withdrawn: the export policy must keep letting them through. */
  announced(podCidrs: ReadonlySet<string>): Promise<ReadonlySet<string>> {
    return this.#advertiser.announced(podCidrs);
  }

  reconcile(vips: ReadonlySet<string>, podCidrs: ReadonlySet<string>, nextHops: Partial<Record<Family, string>>): Promise<void> {
    return this.#advertiser.reconcile(vips, podCidrs, nextHops);
  }

  /** gobgpd restarted: its RIB is empty. */
  forget(): void {
    this.#advertiser.forget();
  }
}
