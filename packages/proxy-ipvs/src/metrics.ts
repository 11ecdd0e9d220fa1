import { gaugeOn, histogramOn, registerServiceTrafficSeries } from '@kube-router/metrics';
import type { ServiceTraffic } from '@kube-router/metrics';
import type { Gauge, Histogram, Registry } from 'prom-client';
import { ipvsServiceId } from '@kube-router/netfilter';
import type { IpvsServiceStats } from '@kube-router/netfilter';
import type { DesiredVirtualServer } from './model.js';

/**
 * kube-router's proxy metrics. The per-Service series are read from the kernel when /metrics is scraped (one
 * `ipvsadm -Ln --stats --exact`), not at each sync: they are current whatever the sync period (kube-router #1875).
 */
export class ProxyMetrics {
  readonly ipvsServices: Gauge;
  readonly syncTime: Histogram;
  readonly exportTime: Histogram;

  constructor(
    registry: Registry,
    readStats: () => Promise<IpvsServiceStats[]>,
    owners: () => ReadonlyMap<string, DesiredVirtualServer>,
    onReadError: (error: unknown) => void,
  ) {
    this.ipvsServices = gaugeOn(registry, { name: 'kube_router_controller_ipvs_services', help: 'Number of ipvs services in the instance' });
    this.syncTime = histogramOn(registry, {
      name: 'kube_router_controller_ipvs_services_sync_time',
      help: 'Time it took for controller to sync ipvs services',
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120],
    });
    this.exportTime = histogramOn(registry, {
      name: 'kube_router_controller_ipvs_metrics_export_time',
      help: 'Time it took to export metrics',
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5],
    });
    // The exporter's time is the read of the kernel, once per scrape whatever the number of series.
    registerServiceTrafficSeries(registry, async () => {
      const started = performance.now();
      try {
        return serviceTraffic(await readStats(), owners());
      } finally {
        this.exportTime.observe((performance.now() - started) / 1000);
      }
    }, onReadError);
  }
}

/** Each virtual server of a Service (not the kernel's others) with its counts, under kube-router's labels. */
function serviceTraffic(stats: readonly IpvsServiceStats[], owners: ReadonlyMap<string, DesiredVirtualServer>): ServiceTraffic[] {
  return stats.flatMap((entry) => {
    const owner = owners.get(ipvsServiceId(entry.service));
    if (!owner) return [];
    const [namespace = '', serviceName = ''] = owner.owner.split('/');
    const { connections, packetsIn, packetsOut, bytesIn, bytesOut } = entry;
    return [
      {
        labels: { svc_namespace: namespace, service_name: serviceName, service_vip: entry.service.address, protocol: entry.service.protocol, port: String(entry.service.port) },
        connections,
        packetsIn,
        packetsOut,
        bytesIn,
        bytesOut,
      },
    ];
  });
}
