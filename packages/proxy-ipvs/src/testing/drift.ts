import type { AgentMetrics } from '@kube-router/metrics';
import type { LogLine } from '@kube-router/testkit';

/** kube_router_controller_drift_repaired_total of the proxy controller for one kind of object; 0 before any. */
export async function driftCount(metrics: AgentMetrics, object: string): Promise<number> {
  const values = (await metrics.registry.getSingleMetric('kube_router_controller_drift_repaired_total')?.get())?.values ?? [];
  return values.find((value) => value.labels.controller === 'proxy' && value.labels.object === object)?.value ?? 0;
}

/** The drift lines of createSyncController (one per kind and sync, naming what was put back) of the kinds given. */
export function driftLines(lines: readonly LogLine[], objects: readonly string[]): { object: unknown; count: unknown; names: unknown }[] {
  return lines
    .filter((line) => line.msg === 'repaired kernel state changed behind the controller' && objects.includes(String(line.object)))
    .map((line) => ({ object: line.object, count: line.count, names: line.names }));
}
