import type { IpvsServiceStats } from '@kube-router/netfilter';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ProxyMetrics } from './metrics.js';
import type { DesiredVirtualServer } from './model.js';

const service = { protocol: 'tcp', address: '10.96.0.10', port: 53 } as const;
const stats = (connections: number): IpvsServiceStats[] => [{ service, connections, packetsIn: 0, packetsOut: 0, bytesIn: 0, bytesOut: 0 }];
const owners = new Map([['tcp/10.96.0.10/53', { owner: 'kube-system/kube-dns' } as DesiredVirtualServer]]);

// A fake kernel reader beside the real test of the same series (proxy.real.test.ts, in the QEMU guest): here the
// point is the registry, which a controller made again must share instead of failing on.
describe('ProxyMetrics', () => {
  it('is made again on the same registry without failing: the sync metrics are shared, the scraped series read the new one', async () => {
    const registry = new Registry();
    const fail = (error: unknown) => expect.unreachable(String(error));
    const first = new ProxyMetrics(registry, async () => stats(1), () => owners, fail);
    const second = new ProxyMetrics(registry, async () => stats(7), () => owners, fail);
    expect(second.syncTime).toBe(first.syncTime);
    expect(second.ipvsServices).toBe(first.ipvsServices);
    const text = await registry.metrics();
    expect(text).toContain('kube_router_service_total_connections{svc_namespace="kube-system",service_name="kube-dns",service_vip="10.96.0.10",protocol="tcp",port="53"} 7');
    expect(text.match(/^# TYPE kube_router_service_total_connections gauge$/gm)).toHaveLength(1);
  });
});
