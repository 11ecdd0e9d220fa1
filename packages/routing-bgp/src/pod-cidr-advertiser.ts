import { SyncFailures } from '@kube-router/controller';
import type { Logger } from 'pino';
import type { ApiPath, GobgpClient } from './gobgp-api.js';
import type { RoutingMetrics } from './metrics.js';
import { AFI_OF, familyOf, type Family, type NodeAddresses } from './nodes.js';
import { isLocalPath, pathNextHop, pathPrefix, podCidrPath } from './paths.js';
import { isVipPath } from './vips.js';

const FAMILIES: readonly Family[] = ['ipv4', 'ipv6'];

export interface PodCidrAdvertiserOptions {
  gobgp: () => Pick<GobgpClient, 'listGlobalPaths' | 'addPath' | 'deletePath'>;
  metrics: Pick<RoutingMetrics, 'advertisementsSent'>;
  logger: Logger;
}

/**
 * This node's pod CIDRs in gobgpd's RIB, per family with the node's address of that family as next hop, reconciled
 * against the RIB itself (a restarted gobgpd gets them back; a CIDR announced with an old address is replaced).
 * Always announced: the export policy decides who gets them. Host routes other than pod CIDRs are Service VIPs, the
 * VIP stage's: this one never withdraws them.
 */
export class PodCidrAdvertiser {
  constructor(private readonly options: PodCidrAdvertiserOptions) {}

  async reconcile(addresses: NodeAddresses, podCidrs: readonly string[]): Promise<void> {
    const failures = new SyncFailures();
    for (const family of FAMILIES) await this.#reconcileFamily(family, addresses.byFamily[family], podCidrs, failures);
    failures.throwIfAny();
  }

  async #reconcileFamily(family: Family, nextHop: string | undefined, podCidrs: readonly string[], failures: SyncFailures): Promise<void> {
    const { logger } = this.options;
    const gobgp = this.options.gobgp();
    const wanted = new Set(podCidrs.filter((c) => familyOf(c.split('/')[0]!) === family));
    const paths = await failures.attempt(`advertisements/${family}`, () => gobgp.listGlobalPaths(AFI_OF[family]));
    if (!paths) return;
    const announced = new Map<string, ApiPath>();
    for (const path of paths) {
      const prefix = pathPrefix(path);
      if (prefix && isLocalPath(path) && !path.isWithdraw) announced.set(prefix, path);
    }
    for (const cidr of wanted) {
      // Announced with the node's current address: nothing to do; with an old one: the new path replaces it.
      const current = announced.get(cidr);
      if (current && pathNextHop(current) === nextHop) continue;
      await failures.attempt(`pod-cidr/${cidr}`, async () => {
        if (!nextHop) throw new Error(`node has no ${family} address to announce ${cidr} with`);
        await gobgp.addPath(podCidrPath(cidr, nextHop));
        this.options.metrics.advertisementsSent.inc({ type: 'pod-route' });
        logger.info({ cidr, nextHop }, 'advertising pod CIDR');
      });
    }
    for (const [prefix, path] of announced) {
      if (wanted.has(prefix) || isVipPath(path, new Set(podCidrs))) continue;
      await failures.attempt(`pod-cidr/${prefix}`, async () => {
        await gobgp.deletePath(path);
        logger.info({ cidr: prefix }, 'withdrew pod CIDR');
      });
    }
  }
}
