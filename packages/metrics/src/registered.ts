import { Counter, Gauge, Histogram } from 'prom-client';
import type { CounterConfiguration, GaugeConfiguration, HistogramConfiguration, Metric, Registry } from 'prom-client';

/**
 * Get-or-create metrics on the agent's registry. Several controllers, informer factories or leader electors share one
 * registry (tests make many), and prom-client refuses to register a name twice: the metric already there under the
 * name is returned instead. One of another kind under the name is an error, named.
 */
export function gaugeOn<L extends string = string>(registry: Registry, config: Omit<GaugeConfiguration<L>, 'registers'>): Gauge<L> {
  return existing(registry, config.name, Gauge) ?? new Gauge({ ...config, registers: [registry] });
}

export function counterOn<L extends string = string>(registry: Registry, config: Omit<CounterConfiguration<L>, 'registers'>): Counter<L> {
  return existing(registry, config.name, Counter) ?? new Counter({ ...config, registers: [registry] });
}

export function histogramOn<L extends string = string>(registry: Registry, config: Omit<HistogramConfiguration<L>, 'registers'>): Histogram<L> {
  return existing(registry, config.name, Histogram) ?? new Histogram({ ...config, registers: [registry] });
}

function existing<T extends Metric>(registry: Registry, name: string, kind: abstract new (...args: never[]) => T): T | undefined {
  const metric = registry.getSingleMetric(name);
  if (metric === undefined) return undefined;
  if (!(metric instanceof kind)) throw new Error(`metric ${name} is registered already, as another kind than ${kind.name}`);
  return metric;
}
