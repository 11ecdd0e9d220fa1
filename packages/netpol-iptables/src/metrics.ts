import type { IpFamily } from '@kube-router/netpol';
import { NetpolSyncMetrics } from '@kube-router/netpol';
import type { Histogram, Registry } from 'prom-client';
import type { KernelTimings } from './kernel.js';

/** kube-router's network policy metrics (pkg/metrics; `NetpolSyncMetrics`), plus its iptables and ipset timings. */
export class NetpolMetrics extends NetpolSyncMetrics implements KernelTimings {
  readonly saveTime: Record<IpFamily, Histogram>;
  readonly restoreTime: Record<IpFamily, Histogram>;
  readonly ipsetRestoreTime: Record<IpFamily, Histogram>;

  constructor(registry: Registry) {
    super(registry);
    this.saveTime = {
      ipv4: this.histogram('kube_router_controller_iptables_v4_save_time', 'Time it took controller to save IPv4 rules'),
      ipv6: this.histogram('kube_router_controller_iptables_v6_save_time', 'Time it took controller to save IPv6 rules'),
    };
    this.restoreTime = {
      ipv4: this.histogram('kube_router_controller_iptables_v4_restore_time', 'Time it took for controller to restore IPv4 rules'),
      ipv6: this.histogram('kube_router_controller_iptables_v6_restore_time', 'Time it took for controller to restore IPv6 rules'),
    };
    this.ipsetRestoreTime = {
      ipv4: this.histogram('kube_router_controller_policy_ipset_v4_restore_time', 'Time it took for controller to restore IPv4 ipsets'),
      ipv6: this.histogram('kube_router_controller_policy_ipset_v6_restore_time', 'Time it took for controller to restore IPv6 ipsets'),
    };
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
