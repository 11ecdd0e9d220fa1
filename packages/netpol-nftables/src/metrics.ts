import type { IpFamily, NetpolObjectCounts } from '@kube-router/netpol';
import { NetpolSyncMetrics } from '@kube-router/netpol';
import { gaugeOn } from '@kube-router/metrics';
import type { Gauge, Histogram, Registry } from 'prom-client';
import type { KernelTimings } from './kernel.js';

/** kube-router's network policy metrics (`NetpolSyncMetrics`), plus the rules and the nft calls themselves. */
export class NetpolNftablesMetrics extends NetpolSyncMetrics implements KernelTimings {
  readonly rules: Gauge;
  readonly transactionTime: Histogram;
  readonly listTime: Histogram<'family'>;

  constructor(registry: Registry) {
    super(registry);
    this.rules = gaugeOn(registry, { name: 'kube_router_netpol_nftables_rules', help: 'Rules in the netpol nftables tables' });
    this.transactionTime = this.histogram('kube_router_netpol_nftables_transaction_time', 'Time of one nft -f transaction');
    this.listTime = this.histogram('kube_router_netpol_nftables_list_time', 'Time it took to read a netpol table back with nft -j', ['family']);
  }

  override recordObjects(counts: NetpolObjectCounts): void {
    super.recordObjects(counts);
    this.rules.set(counts.rules ?? 0);
  }

  list(family: IpFamily, seconds: number): void {
    this.listTime.observe({ family }, seconds);
  }

  transaction(seconds: number): void {
    this.transactionTime.observe(seconds);
  }
}
