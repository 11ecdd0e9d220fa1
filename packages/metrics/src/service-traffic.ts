import { Gauge } from 'prom-client';
import type { Registry } from 'prom-client';

/** kube-router's labels of a per-Service series: one Service address and port (an IPVS virtual server). */
export interface ServiceTrafficLabels {
  readonly svc_namespace: string;
  readonly service_name: string;
  readonly service_vip: string;
  readonly protocol: string;
  readonly port: string;
}

/** What kube-router exports of one Service address and port. */
export interface ServiceTraffic {
  readonly labels: ServiceTrafficLabels;
  readonly connections: number;
  readonly packetsIn: number;
  readonly packetsOut: number;
  readonly bytesIn: number;
  readonly bytesOut: number;
}

const SERVICE_TRAFFIC_LABELS = ['svc_namespace', 'service_name', 'service_vip', 'protocol', 'port'] as const;

/** kube-router's per-Service series: its names, help texts and labels, whichever proxy fills them. */
const SERVICE_TRAFFIC_SERIES: readonly [string, string, keyof Omit<ServiceTraffic, 'labels'>][] = [
  ['kube_router_service_total_connections', 'Total incoming connections made', 'connections'],
  ['kube_router_service_packets_in', 'Total incoming packets', 'packetsIn'],
  ['kube_router_service_packets_out', 'Total outgoing packets', 'packetsOut'],
  ['kube_router_service_bytes_in', 'Total incoming bytes', 'bytesIn'],
  ['kube_router_service_bytes_out', 'Total outgoing bytes', 'bytesOut'],
];

/**
 * Registers kube-router's five per-Service gauges (`kube_router_service_*`), filled from `read` when /metrics is
 * scraped, not at each sync, so that they are current whatever the sync period (kube-router #1875). One read serves
 * all five gauges of a scrape (prom-client collects them one after another). A read that fails leaves the series
 * missing from that scrape, never fails it, and goes to `onReadError` (to be logged): the sync metrics report a broken
 * kernel. The gauges read this caller's
 * kernel, so a proxy made again on the same registry (a custom assembly that restarts its plugins, or the other proxy)
 * takes them over instead of failing to register them.
 */
export function registerServiceTrafficSeries(
  registry: Registry,
  read: () => Promise<readonly ServiceTraffic[]>,
  onReadError: (error: unknown) => void,
): void {
  let pending: Promise<readonly ServiceTraffic[]> | undefined;
  const readOnce = (): Promise<readonly ServiceTraffic[]> => {
    if (!pending) {
      pending = read().catch((error: unknown) => {
        onReadError(error);
        return [];
      });
      void pending.finally(() => setTimeout(() => (pending = undefined), 0));
    }
    return pending;
  };
  for (const [name, help, field] of SERVICE_TRAFFIC_SERIES) {
    registry.removeSingleMetric(name);
    new Gauge({
      name,
      help,
      labelNames: SERVICE_TRAFFIC_LABELS,
      registers: [registry],
      async collect() {
        this.reset();
        for (const traffic of await readOnce()) this.set({ ...traffic.labels }, traffic[field]);
      },
    });
  }
}
