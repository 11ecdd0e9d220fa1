import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { counterOn, gaugeOn, histogramOn } from './registered.js';

describe('gaugeOn, counterOn, histogramOn', () => {
  it('create a metric once per registry and return the same one after that', async () => {
    const registry = new Registry();
    const first = gaugeOn(registry, { name: 'x_gauge', help: 'a gauge', labelNames: ['family'] });
    const again = gaugeOn(registry, { name: 'x_gauge', help: 'a gauge', labelNames: ['family'] });
    expect(again).toBe(first);
    first.set({ family: 'ipv4' }, 3);
    expect(histogramOn(registry, { name: 'x_seconds', help: 'h', buckets: [1] })).toBe(histogramOn(registry, { name: 'x_seconds', help: 'h' }));
    counterOn(registry, { name: 'x_total', help: 'c' }).inc();
    counterOn(registry, { name: 'x_total', help: 'c' }).inc();
    const text = await registry.metrics();
    expect(text).toContain('x_gauge{family="ipv4"} 3');
    expect(text).toContain('x_total 2');
    // Another registry has metrics of its own.
    expect(gaugeOn(new Registry(), { name: 'x_gauge', help: 'a gauge' })).not.toBe(first);
  });

  it('name the metric when one of another kind holds the name', () => {
    const registry = new Registry();
    gaugeOn(registry, { name: 'x_taken', help: 'a gauge' });
    expect(() => counterOn(registry, { name: 'x_taken', help: 'c' })).toThrow('metric x_taken is registered already, as another kind than Counter');
  });
});
