import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { parseNftJson } from '@kube-router/netfilter';
import { parseCounterListing, serviceTraffic } from './counters.js';
import type { ServiceTraffic } from '@kube-router/metrics';
import { ProxyNftablesMetrics } from './metrics.js';
import { buildProxyModel } from './model.js';
import { counterName, renderTable } from './render.js';
import type { RenderOptions } from './render.js';
import { diffScript, fullScript } from './script.js';
import { node, service, slice } from './testing/objects.js';

const RENDER: RenderOptions = { family: 'ipv4', podCidrs: ['10.244.0.0/16'], masqueradeAll: false, nodePortBindOnAllIp: false };

function table(services: Parameters<typeof service>[], options: Partial<RenderOptions> = {}) {
  const model = buildProxyModel(
    { services: services.map((args) => service(...args)), slicesFor: () => [slice([{ ip: '10.244.0.5' }])], node: node(), nodeName: 'node-a' },
    { families: ['ipv4'], nodePortBindOnAllIp: options.nodePortBindOnAllIp ?? false, serviceProxyName: 'kube-router' },
  );
  return renderTable(model.groups.ipv4, model.nodePortAddresses.ipv4, { ...RENDER, ...options });
}

const LB: Parameters<typeof service> = [
  'lb',
  { type: 'LoadBalancer', externalIPs: ['203.0.113.7'], ports: [{ name: 'http', port: 80, nodePort: 30080, protocol: 'TCP' }] },
  { status: { loadBalancer: { ingress: [{ ip: '198.51.100.10' }] } } },
];

describe('per-Service counters in the table', () => {
  it('has three counters per address proxy-ipvs has a virtual server for: cluster IP, external IP, LoadBalancer IP, NodePort per node address', () => {
    const state = table([LB]);
    const addresses = [...new Set([...state.counters.values()].map((counter) => `${counter.address}:${counter.port}`))].sort();
    expect(addresses).toEqual(['10.96.0.10:80', '192.168.1.1:30080', '198.51.100.10:80', '203.0.113.7:80']);
    expect(state.counters.size).toBe(12);
    const name = counterName('connections', { owner: 'default/lb', protocol: 'tcp', portName: 'http' }, '192.168.1.1', 30080);
    expect(name).toMatch(/^connections-[A-Z2-7]{8}-default\/lb\/tcp\/http__192\.168\.1\.1\/30080$/);
    expect(state.counters.get(name)).toEqual({ kind: 'connections', owner: 'default/lb', address: '192.168.1.1', protocol: 'tcp', port: 30080 });
    expect(state.maps['service-connection-counters'].get('192.168.1.1 . tcp . 30080')).toBe(name);
    expect(state.maps['service-in-counters'].get('10.96.0.10 . tcp . 80')).toMatch(/^in-/);
    expect(state.maps['service-out-counters'].get('10.96.0.10 . tcp . 80')).toMatch(/^out-/);
  });

  it('counts connections in the nat chain, in before DNAT and out after source NAT', () => {
    const base = table([]).base.join('\n');
    expect(base).toContain('add rule T services counter name ip daddr . meta l4proto . th dport map @service-connection-counters');
    expect(base).toContain('add rule T filter-prerouting ct direction original counter name ip daddr . meta l4proto . th dport map @service-in-counters');
    expect(base).toContain('add rule T filter-output ct direction original counter name ip daddr . meta l4proto . th dport map @service-in-counters');
    expect(base).toContain('add rule T counters-input ct direction reply counter name ip saddr . meta l4proto . th sport map @service-out-counters');
    expect(base).toContain('add rule T counters-postrouting ct direction reply counter name ip saddr . meta l4proto . th sport map @service-out-counters');
    expect(base).toContain('add chain T counters-postrouting { type filter hook postrouting priority 300 ; policy accept ; }');
  });

  it('counts no NodePort per address with nodePortBindOnAllIp (the addresses are not known)', () => {
    const state = table([LB], { nodePortBindOnAllIp: true });
    expect([...state.counters.values()].some((counter) => counter.port === 30080)).toBe(false);
    expect(state.counters.size).toBe(9);
  });

  it('a full write adds every counter before the elements naming it (quoted) and deletes only its own stale counters', () => {
    const state = table([['web']]);
    const stale = counterName('in', { owner: 'default/gone', protocol: 'tcp', portName: 'http' }, '10.96.0.99', 80);
    const { script } = fullScript('ip t', state, { chains: new Set(), sets: new Set(), counters: new Set([...state.counters.keys(), stale, 'someone-elses']) });
    const lines = script.split('\n');
    const inName = state.maps['service-in-counters'].get('10.96.0.10 . tcp . 80') ?? '';
    const added = lines.indexOf(`add counter ip t ${inName}`);
    const element = lines.indexOf(`add element ip t service-in-counters { 10.96.0.10 . tcp . 80 : "${inName}" }`);
    expect(added).toBeGreaterThan(0);
    expect(element).toBeGreaterThan(added);
    expect(lines.indexOf(`delete counter ip t ${stale}`)).toBeGreaterThan(lines.indexOf('flush map ip t service-in-counters'));
    expect(script).not.toContain('delete counter ip t someone-elses');
    expect(script.match(/^delete counter/gm)).toHaveLength(1);
  });

  it('an event write adds a new Service’s counters before their elements and deletes a gone one’s after its elements', () => {
    const before = table([['web']]);
    const after = table([['web'], ['api', { clusterIP: '10.96.0.11' }]]);
    const added = diffScript('ip t', before, after).script.split('\n');
    const counterLine = added.findIndex((line) => /^add counter ip t connections-.*default\/api\//.test(line));
    expect(counterLine).toBeGreaterThanOrEqual(0);
    expect(added.findIndex((line) => line.startsWith('add element ip t service-connection-counters { 10.96.0.11 . tcp . 80 : "connections-'))).toBeGreaterThan(counterLine);
    expect(added.filter((line) => line.startsWith('add counter'))).toHaveLength(3);
    const removed = diffScript('ip t', after, before).script.split('\n');
    const elementDelete = removed.indexOf('delete element ip t service-connection-counters { 10.96.0.11 . tcp . 80 }');
    expect(elementDelete).toBeGreaterThanOrEqual(0);
    const counterDeletes = removed.flatMap((line, index) => (line.startsWith('delete counter ip t ') ? [index] : []));
    expect(counterDeletes).toHaveLength(3);
    expect(Math.min(...counterDeletes)).toBeGreaterThan(elementDelete);
    // Unchanged: nothing about counters, whatever they count.
    expect(diffScript('ip t', after, after).script).toBe('');
  });
});

// What `nft -j list counters table ip t` printed on this host (nft 1.0.6), a rule's counter statement added.
const LISTING = JSON.stringify({
  nftables: [
    { metainfo: { version: '1.0.6', release_name: 'Lester Gooch #5', json_schema_version: 1 } },
    { counter: { family: 'ip', name: 'in-AAAAAAAA-ns/web/tcp/http__10.96.0.10/80', table: 't', handle: 4, packets: 12, bytes: 900 } },
    { counter: { family: 'ip', name: 'out-AAAAAAAA-ns/web/tcp/http__10.96.0.10/80', table: 't', handle: 5, packets: 10, bytes: 4000 } },
    { counter: { family: 'ip', name: 'connections-AAAAAAAA-ns/web/tcp/http__10.96.0.10/80', table: 't', handle: 6, packets: 3, bytes: 180 } },
    { counter: { family: 'ip', name: 'someone-elses', table: 't', handle: 7, packets: 1, bytes: 1 } },
    { rule: { family: 'ip', table: 't', chain: 'c', handle: 8, expr: [{ counter: { packets: 0, bytes: 0 } }] } },
  ],
}).replaceAll('":', '": ').replaceAll(',"', ', "');

describe('reading the counters', () => {
  const written = new Map(
    (['connections', 'in', 'out'] as const).map((kind) => [
      `${kind}-AAAAAAAA-ns/web/tcp/http__10.96.0.10/80`,
      { kind, owner: 'ns/web', address: '10.96.0.10', protocol: 'tcp', port: 80 },
    ]),
  );

  it('parses a listing and maps the counters to kube-router’s labels, leaving out counters the plugin did not write', async () => {
    const values = await parseCounterListing(LISTING);
    expect(values.size).toBe(4);
    expect(serviceTraffic(written, values)).toEqual([
      { labels: { svc_namespace: 'ns', service_name: 'web', service_vip: '10.96.0.10', protocol: 'tcp', port: '80' }, connections: 3, packetsIn: 12, bytesIn: 900, packetsOut: 10, bytesOut: 4000 },
    ]);
    expect(await parseCounterListing('')).toEqual(new Map());
    await expect(parseCounterListing('{"nope": 1}')).rejects.toThrow(/nftables/);
  });

  it('finds the counter objects’ names in a table listing, not the counter statements of rules', () => {
    expect(parseNftJson(LISTING).counters.map((counter) => counter.name)).toEqual([...written.keys()].sort((a, b) => (a.startsWith('in') ? -1 : b.startsWith('in') ? 1 : a.startsWith('out') ? -1 : 1)).concat('someone-elses'));
  });

  it('parses 30,000 counters (10,000 Services) in slices', async () => {
    const items = Array.from({ length: 30_000 }, (_, i) => ({ counter: { family: 'ip', name: `in-X-ns/s${i}/tcp/p__10.0.0.1/80`, table: 't', handle: i, packets: i, bytes: i * 10 } }));
    // nft's own spacing, which the slices are cut on.
    const text = JSON.stringify({ nftables: items }).replaceAll('":', '": ').replaceAll(',"', ', "').replaceAll('},{', '}, {');
    let yields = 0;
    let ticking = true;
    const tick = () => {
      yields++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const started = performance.now();
    const values = await parseCounterListing(text);
    const ms = performance.now() - started;
    ticking = false;
    expect(values.size).toBe(30_000);
    expect(values.get('in-X-ns/s29999/tcp/p__10.0.0.1/80')).toEqual({ packets: 29_999, bytes: 299_990 });
    expect(yields, 'the event loop ran between slices').toBeGreaterThan(5);
    console.log(`parseCounterListing: 30,000 counters (${(text.length / 1024 / 1024).toFixed(1)} MiB) in ${ms.toFixed(1)} ms, ${yields} turns of the event loop meanwhile`);
  });
});

describe('the kube_router_service_* series', () => {
  const sample: ServiceTraffic = {
    labels: { svc_namespace: 'ns', service_name: 'web', service_vip: '10.96.0.10', protocol: 'tcp', port: '80' },
    connections: 3,
    packetsIn: 12,
    packetsOut: 10,
    bytesIn: 900,
    bytesOut: 4000,
  };

  it('are read once per scrape for all five gauges, with proxy-ipvs’s names and labels', async () => {
    const registry = new Registry();
    let reads = 0;
    new ProxyNftablesMetrics(
      registry,
      async () => {
        reads++;
        return [sample];
      },
      (error) => expect.unreachable(String(error)),
    );
    const text = await registry.metrics();
    expect(reads).toBe(1);
    const labels = 'svc_namespace="ns",service_name="web",service_vip="10.96.0.10",protocol="tcp",port="80"';
    expect(text).toContain(`kube_router_service_total_connections{${labels}} 3`);
    expect(text).toContain(`kube_router_service_packets_in{${labels}} 12`);
    expect(text).toContain(`kube_router_service_packets_out{${labels}} 10`);
    expect(text).toContain(`kube_router_service_bytes_in{${labels}} 900`);
    expect(text).toContain(`kube_router_service_bytes_out{${labels}} 4000`);
    await new Promise((resolve) => setTimeout(resolve, 5));
    await registry.metrics();
    expect(reads).toBe(2);
  });

  it('a failed read leaves the series missing and the scrape whole, and is reported', async () => {
    const registry = new Registry();
    const errors: unknown[] = [];
    new ProxyNftablesMetrics(registry, () => Promise.reject(new Error('nft: no such table')), (error) => errors.push(error));
    const text = await registry.metrics();
    expect(errors.map(String)).toEqual(['Error: nft: no such table']);
    expect(text).not.toMatch(/^kube_router_service_total_connections\{/m);
    expect(text).toContain('kubeproxy_sync_proxy_rules_last_timestamp_seconds');
  });
});
