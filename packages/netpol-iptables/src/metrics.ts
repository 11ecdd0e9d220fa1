import type { IpFamily } from '@kube-router/netpol';
import { Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';
import type { KernelTimings } from './kernel.js';

/** kube-router's network policy metrics (pkg/metrics), under the same names, plus what it lacked. */
export class NetpolMetrics implements KernelTimings {
  readonly syncTime: Histogram;
  readonly policyChainsSyncTime: Histogram;
  readonly saveTime: Record<IpFamily, Histogram>;
  readonly restoreTime: Record<IpFamily, Histogram>;
  readonly ipsetRestoreTime: Record<IpFamily, Histogram>;
  readonly policyChains: Gauge;
  readonly policyIpsets: Gauge;
  readonly failedPolicies: Gauge;
  readonly computeTime: Histogram;

  constructor(registry: Registry) {
    const histogram = (name: string, help: string) =>
      (registry.getSingleMetric(name) as Histogram | undefined) ??
      new Histogram({
        name,
        help,
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
    this.saveTime = {
      ipv4: histogram('kube_router_controller_iptables_v4_save_time', 'Time it took controller to save IPv4 rules'),
      ipv6: histogram('kube_router_controller_iptables_v6_save_time', 'Time it took controller to save IPv6 rules'),
    };
    this.restoreTime = {
      ipv4: histogram('kube_router_controller_iptables_v4_restore_time', 'Time it took for controller to restore IPv4 rules'),
      ipv6: histogram('kube_router_controller_iptables_v6_restore_time', 'Time it took for controller to restore IPv6 rules'),
    };
    this.ipsetRestoreTime = {
      ipv4: histogram('kube_router_controller_policy_ipset_v4_restore_time', 'Time it took for controller to restore IPv4 ipsets'),
      ipv6: histogram('kube_router_controller_policy_ipset_v6_restore_time', 'Time it took for controller to restore IPv6 ipsets'),
    };
    this.policyChains = gauge('kube_router_controller_policy_chains', 'Active policy chains');
    this.policyIpsets = gauge('kube_router_controller_policy_ipsets', 'Active policy ipsets');
    this.failedPolicies = gauge(
      'kube_router_netpol_failed_policies',
      'Network policies whose targets are failed closed because the policy is invalid or could not be programmed',
    );
    this.computeTime = histogram(
      'kube_router_netpol_compute_time',
      'Time it took to compile network policies and render their rules, without the kernel',
    );
  }

  save(family: IpFamily, seconds: number): void {
    this.saveTime[family].observe(seconds);
  }

  restore(family: IpFamily, seconds: number): void {
    this.restoreTime[family].observe(seconds);
  }

  ipsetRestore(family: IpFamily, seconds: number): void {
    this.ipsetRestoreTime[family].observe(seconds);
  }
}
