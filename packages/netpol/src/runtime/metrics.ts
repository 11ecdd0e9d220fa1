import { counterOn, gaugeOn, histogramOn } from '@kube-router/metrics';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';

const SECONDS_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** Our objects known to be in the kernel: the policy chains and ipsets gauges. */
export interface NetpolObjectCounts {
  readonly chains: number;
  readonly sets: number;
  /** Rules in all, for a backend that counts them (nftables' kube_router_netpol_nftables_rules); others leave it out. */
  readonly rules?: number;
}

/**
 * kube-router's network policy metrics that both backends report, under kube-router's names (its nftables
 * controller reports into the same series as its iptables one), plus the failed policies and the compute time it
 * lacked. A backend's own metrics extend it.
 */
export class NetpolSyncMetrics {
  readonly syncTime: Histogram;
  readonly policyChainsSyncTime: Histogram;
  readonly policyChains: Gauge;
  readonly policyIpsets: Gauge;
  readonly failedPolicies: Gauge;
  readonly computeTime: Histogram;
  readonly compiles: Counter<'input'>;

  constructor(protected readonly registry: Registry) {
    this.syncTime = this.histogram('kube_router_controller_iptables_sync_time', 'Time it took for the iptables sync loop to complete');
    this.policyChainsSyncTime = this.histogram('kube_router_controller_policy_chains_sync_time', 'Time it took for controller to sync policy chains');
    this.policyChains = gaugeOn(registry, { name: 'kube_router_controller_policy_chains', help: 'Active policy chains' });
    this.policyIpsets = gaugeOn(registry, { name: 'kube_router_controller_policy_ipsets', help: 'Active policy ipsets' });
    this.failedPolicies = gaugeOn(registry, {
      name: 'kube_router_netpol_failed_policies',
      help: 'Network policies whose targets are failed closed because the policy is invalid or could not be programmed',
    });
    this.computeTime = this.histogram('kube_router_netpol_compute_time', 'Time it took to compile network policies and render their rules, without the kernel');
    this.compiles = counterOn(registry, {
      name: 'kube_router_netpol_compiles_total',
      help: 'Policy compiles, by what they read: input="changes" (only the objects an event changed) or "lists" (every pod, namespace and policy)',
      labelNames: ['input'],
    });
    for (const input of ['changes', 'lists']) this.compiles.inc({ input }, 0);
  }

  /** Our objects known to be in the kernel after a sync; a backend that counts more records more. */
  recordObjects(counts: NetpolObjectCounts): void {
    this.policyChains.set(counts.chains);
    this.policyIpsets.set(counts.sets);
  }

  /** A histogram of seconds, with the buckets of the others. */
  protected histogram<L extends string = string>(name: string, help: string, labelNames: readonly L[] = []): Histogram<L> {
    return histogramOn<L>(this.registry, { name, help, labelNames, buckets: SECONDS_BUCKETS });
  }
}
