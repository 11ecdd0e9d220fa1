import { counterOn, gaugeOn, histogramOn, registerServiceTrafficSeries } from '@kube-router/metrics';
import type { ServiceTraffic } from '@kube-router/metrics';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Reads the per-Service counters from the kernel; what cannot be read is left out (and logged) by the reader. */
export type ServiceTrafficReader = () => Promise<readonly ServiceTraffic[]>;

const SYNC_BUCKETS = [0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192, 16.384];

/**
 * The nftables proxy's metrics: kube-proxy's sync metrics under their names (so its dashboards read this proxy too), and
 * kube-router's count of programmed Service ports, and kube-router's per-Service traffic series (`kube_router_service_*`,
 * read from the tables' named counters when /metrics is scraped).
 */
export class ProxyNftablesMetrics {
  readonly syncDuration: Histogram;
  readonly fullSyncDuration: Histogram;
  readonly partialSyncDuration: Histogram;
  readonly lastSync: Gauge;
  readonly noLocalEndpoints: Gauge<'traffic_policy'>;
  readonly servicePorts: Gauge<'family'>;
  readonly conntrackDeleted: Counter;
  readonly syncFailures: Counter;

  /** `readTraffic` fills the per-Service series at scrape time; a read that fails goes to `onReadError`. */
  constructor(registry: Registry, readTraffic: ServiceTrafficReader, onReadError: (error: unknown) => void) {
    this.syncDuration = histogramOn(registry, { name: 'kubeproxy_sync_proxy_rules_duration_seconds', help: 'SyncProxyRules latency in seconds', buckets: SYNC_BUCKETS });
    this.fullSyncDuration = histogramOn(registry, { name: 'kubeproxy_sync_full_proxy_rules_duration_seconds', help: 'SyncProxyRules latency in seconds for full resyncs', buckets: SYNC_BUCKETS });
    this.partialSyncDuration = histogramOn(registry, { name: 'kubeproxy_sync_partial_proxy_rules_duration_seconds', help: 'SyncProxyRules latency in seconds for partial resyncs', buckets: SYNC_BUCKETS });
    this.lastSync = gaugeOn(registry, { name: 'kubeproxy_sync_proxy_rules_last_timestamp_seconds', help: 'The last time proxy rules were successfully synced' });
    this.noLocalEndpoints = gaugeOn(registry, {
      name: 'kubeproxy_sync_proxy_rules_no_local_endpoints_total',
      help: 'Number of services with a Local traffic policy and no endpoints',
      labelNames: ['traffic_policy'],
    });
    this.servicePorts = gaugeOn(registry, { name: 'kube_router_proxy_nftables_service_ports', help: 'Service ports programmed in the nftables proxy tables', labelNames: ['family'] });
    this.conntrackDeleted = counterOn(registry, { name: 'kube_router_proxy_conntrack_entries_deleted_total', help: 'UDP conntrack entries deleted because their endpoint went' });
    this.syncFailures = counterOn(registry, { name: 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total', help: 'Failed nftables transactions of the proxy tables' });
    registerServiceTrafficSeries(registry, readTraffic, onReadError);
  }
}
