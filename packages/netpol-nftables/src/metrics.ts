import type { IpFamily } from '@kube-router/netpol';
import { Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';
import type { KernelTimings } from './kernel.js';

/**
 * kube-router's network policy metrics under its names (its nftables controller reports into the same series as its
 * iptables one), plus what it lacked: rules, failed policies, compute time and the nft calls themselves.
 */
export class NetpolNftablesMetrics implements KernelTimings {
  readonly syncTime: Histogram;
  readonly policyChainsSyncTime: Histogram;
  readonly policyChains: Gauge;
  readonly policyIpsets: Gauge;
  readonly rules: Gauge;
  readonly failedPolicies: Gauge;
  readonly computeTime: Histogram;
  readonly transactionTime: Histogram;
  readonly listTime: Histogram;

  constructor(registry: Registry) {
    const histogram = (name: string, help: string, labelNames: string[] = []) =>
      (registry.getSingleMetric(name) as Histogram | undefined) ??
      new Histogram({
        name,
        help,
        labelNames,
        buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
        registers: [registry],
      });
    const gauge = (name: string, help: string) =>
      (registry.getSingleMetric(name) as Gauge | undefined) ?? new Gauge({ name, help, registers: [registry] });
    this.syncTime = histogram('kube_router_controller_iptables_sync_time', 'Time it took for the iptables sync loop to complete');
    this.policyChainsSyncTime = histogram(
      'kube_router_controller_policy_chains_sync_time',
      'Time it took for controller to sync policy chains',
    );
    this.policyChains = gauge('kube_router_controller_policy_chains', 'Active policy chains');
    this.policyIpsets = gauge('kube_router_controller_policy_ipsets', 'Active policy ipsets');
    this.rules = gauge('kube_router_netpol_nftables_rules', 'Rules in the netpol nftables tables');
    this.failedPolicies = gauge(
      'kube_router_netpol_failed_policies',
      'Network policies whose targets are failed closed because the policy is invalid or could not be programmed',
    );
    this.computeTime = histogram(
      'kube_router_netpol_compute_time',
      'Time it took to compile network policies and render their rules, without the kernel',
    );
    this.transactionTime = histogram('kube_router_netpol_nftables_transaction_time', 'Time of one nft -f transaction');
    this.listTime = histogram('kube_router_netpol_nftables_list_time', 'Time it took to read a netpol table back with nft -j', ['family']);
  }

  list(family: IpFamily, seconds: number): void {
    this.listTime.observe({ family }, seconds);
  }

  transaction(seconds: number): void {
    this.transactionTime.observe(seconds);
  }
}
