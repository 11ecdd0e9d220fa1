import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { registerServiceTrafficSeries } from './service-traffic.js';
import type { ServiceTraffic } from './service-traffic.js';

const web: ServiceTraffic = {
  labels: { svc_namespace: 'demo', service_name: 'web', service_vip: '10.96.0.3', protocol: 'tcp', port: '80' },
  connections: 5,
  packetsIn: 15,
  packetsOut: 10,
  bytesIn: 900,
  bytesOut: 1200,
};

describe('registerServiceTrafficSeries', () => {
  it("fills kube-router's five per-Service gauges from one read per scrape", async () => {
    const registry = new Registry();
    let reads = 0;
    registerServiceTrafficSeries(
      registry,
      async () => {
        reads++;
        return [web];
      },
      (error) => expect.unreachable(String(error)),
    );
    const text = await registry.metrics();
    expect(reads).toBe(1);
    const labels = 'port="80",protocol="tcp",service_name="web",service_vip="10.96.0.3",svc_namespace="demo"';
    for (const line of [
      `kube_router_service_total_connections{${labels}} 5`,
      `kube_router_service_packets_in{${labels}} 15`,
      `kube_router_service_packets_out{${labels}} 10`,
      `kube_router_service_bytes_in{${labels}} 900`,
      `kube_router_service_bytes_out{${labels}} 1200`,
    ]) {
      expect(text.split('\n').map((row) => row.replace(/\{([^}]*)\}/, (_, inner: string) => `{${inner.split(',').sort().join(',')}}`))).toContain(line);
    }
    // The next scrape reads again (the five gauges of one scrape share a read: it is kept until the next turn).
    await new Promise((resolve) => setTimeout(resolve, 5));
    await registry.metrics();
    expect(reads).toBe(2);
  });

  it('leaves the series out of a scrape whose read fails, and a second registration takes the gauges over', async () => {
    const registry = new Registry();
    const errors: unknown[] = [];
    registerServiceTrafficSeries(registry, () => Promise.reject(new Error('nft: no such table')), (error) => errors.push(error));
    const failed = await registry.metrics();
    expect(errors.map(String)).toEqual(['Error: nft: no such table']);
    expect(failed).toContain('# TYPE kube_router_service_total_connections gauge');
    expect(failed).not.toMatch(/^kube_router_service_total_connections\{/m);
    registerServiceTrafficSeries(registry, async () => [web], (error) => errors.push(error));
    expect(await registry.metrics()).toMatch(/^kube_router_service_total_connections\{.*\} 5$/m);
  });
});
