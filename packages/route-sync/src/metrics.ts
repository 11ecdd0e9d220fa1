import { counterOn, gaugeOn, histogramOn } from '@kube-router/metrics';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** kube-router's route-sync metrics (pkg/metrics), under its names and types. */
export class RouteSyncMetrics {
  readonly synced: Gauge;
  readonly added: Counter;
  readonly removed: Counter;
  readonly syncTime: Histogram;

  constructor(registry: Registry) {
    // Get-or-create: a registry outlives a controller in tests that create several.
    this.synced = gaugeOn(registry, { name: 'kube_router_host_routes_synced', help: 'Count of host routes currently synced to the system' });
    this.added = counterOn(registry, { name: 'kube_router_host_routes_added', help: 'Total count of host routes added to the system' });
    this.removed = counterOn(registry, { name: 'kube_router_host_routes_removed', help: 'Total count of host routes removed from the system' });
    this.syncTime = histogramOn(registry, {
      name: 'kube_router_host_routes_sync_time',
      help: 'Time it took for the host routes controller to sync to the system',
      // Prometheus' default buckets, as kube-router's histogram has.
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    });
  }
}
