import { gaugeOn, histogramOn } from '@kube-router/metrics';
import { Gauge } from 'prom-client';
import type { Histogram, Registry } from 'prom-client';
import { ipvsServiceId } from '@kube-router/netfilter';
import type { IpvsServiceStats } from '@kube-router/netfilter';
import type { DesiredVirtualServer } from './model.js';

const SERVICE_LABELS = ['svc_namespace', 'service_name', 'service_vip', 'protocol', 'port'] as const;

const COUNTERS: readonly [string, string, keyof Omit<IpvsServiceStats, 'service'>][] = [
  ['kube_router_service_total_connections', 'Total incoming connections made', 'connections'],
  ['kube_router_service_packets_in', 'Total incoming packets', 'packetsIn'],
  ['kube_router_service_packets_out', 'Total outgoing packets', 'packetsOut'],
  ['kube_router_service_bytes_in', 'Total incoming bytes', 'bytesIn'],
  ['kube_router_service_bytes_out', 'Total outgoing bytes', 'bytesOut'],
];

/**
 * kube-router's proxy metrics. The per-Service series are read from the kernel when /metrics is scraped (one
 * `ipvsadm -Ln --stats --exact`), not at each sync: they are current whatever the sync period (kube-router #1875).
 */
export class ProxyMetrics {
  readonly ipvsServices: Gauge;
  readonly syncTime: Histogram;
  readonly exportTime: Histogram;

  constructor(registry: Registry, readStats: () => Promise<IpvsServiceStats[]>, owners: () => ReadonlyMap<string, DesiredVirtualServer>) {
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
    // One read of the kernel serves all five gauges of a scrape: prom-client collects them one after another.
    let pending: Promise<IpvsServiceStats[]> | undefined;
    const read = (): Promise<IpvsServiceStats[]> => {
      if (!pending) {
        const started = performance.now();
        pending = readStats().finally(() => {
          this.exportTime.observe((performance.now() - started) / 1000);
          setTimeout(() => (pending = undefined), 0);
        });
      }
      return pending;
    };
    for (const [name, help, field] of COUNTERS) {
      // These read this instance's kernel and Services when scraped: a controller made again on the same registry
      // (a custom assembly that restarts its plugins) takes them over instead of failing to register them.
      registry.removeSingleMetric(name);
      new Gauge({
        name,
        help,
        labelNames: SERVICE_LABELS,
        registers: [registry],
        async collect() {
          this.reset();
          let stats: IpvsServiceStats[];
          try {
            stats = await read();
          } catch {
            return; // An unreadable kernel shows as missing series; the sync metrics report the failure.
          }
          const known = owners();
          for (const entry of stats) {
            const owner = known.get(ipvsServiceId(entry.service));
            if (!owner) continue;
            const [namespace = '', serviceName = ''] = owner.owner.split('/');
            this.set(
              { svc_namespace: namespace, service_name: serviceName, service_vip: entry.service.address, protocol: entry.service.protocol, port: String(entry.service.port) },
              entry[field],
            );
          }
        },
      });
    }
  }
}
