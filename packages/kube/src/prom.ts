import { Counter, Gauge } from 'prom-client';
import type { CounterConfiguration, GaugeConfiguration, Registry } from 'prom-client';

/**
 * A gauge on the given registry, reusing one of the same name if it is there already: several factories or electors
 * may share the agent's registry (and do in tests), and prom-client refuses a second registration of a name.
 */
export function gaugeOn<L extends string>(registry: Registry, config: Omit<GaugeConfiguration<L>, 'registers'>): Gauge<L> {
  const existing = registry.getSingleMetric(config.name);
  if (existing instanceof Gauge) return existing as Gauge<L>;
  return new Gauge({ ...config, registers: [registry] });
}

export function counterOn<L extends string>(
  registry: Registry,
  config: Omit<CounterConfiguration<L>, 'registers'>,
): Counter<L> {
  const existing = registry.getSingleMetric(config.name);
  if (existing instanceof Counter) return existing as Counter<L>;
  return new Counter({ ...config, registers: [registry] });
}
