import { hasTool } from '@kube-router/netfilter';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '@kube-router/testkit';
import type { KubeObjectInput } from '@kube-router/testkit';
import pino from 'pino';
import { createProxyNftablesPlugin } from './plugin.js';
import { NODE_NAME, serviceObject, sliceObject, startProxy } from './testing/harness.js';
import type { EndpointInput, ProxyHarness } from './testing/harness.js';
import { EXTERNAL_IPS, NODE_IPS, NftProxyWorld, POD_CIDRS } from './testing/world.js';
import type { Pod, ProbeResult } from './testing/world.js';

function unavailable(): string | undefined {
  if (process.platform !== 'linux') return 'not Linux';
  if (process.getuid?.() !== 0) return 'needs root';
  for (const tool of ['nft', 'conntrack', 'ip']) if (!hasTool(tool)) return `${tool} is not installed`;
  return undefined;
}
const skip = unavailable();

const FAMILIES = ['ipv4', 'ipv6'] as const;
type Family = (typeof FAMILIES)[number];
const CLUSTER_IPS: Record<string, Record<Family, string>> = {
  web: { ipv4: '10.96.0.10', ipv6: 'fd00:96::10' },
  empty: { ipv4: '10.96.0.11', ipv6: 'fd00:96::11' },
  lb: { ipv4: '10.96.0.12', ipv6: 'fd00:96::12' },
  sticky: { ipv4: '10.96.0.13', ipv6: 'fd00:96::13' },
  dns: { ipv4: '10.96.0.14', ipv6: 'fd00:96::14' },
  hairpin: { ipv4: '10.96.0.15', ipv6: 'fd00:96::15' },
  refused: { ipv4: '10.96.0.16', ipv6: 'fd00:96::16' },
  local: { ipv4: '10.96.0.17', ipv6: 'fd00:96::17' },
  counted: { ipv4: '10.96.0.18', ipv6: 'fd00:96::18' },
};
const LB_IPS: Record<Family, string> = { ipv4: '198.51.100.10', ipv6: '2001:db8::10' };
const clusterIps = (name: string) => [CLUSTER_IPS[name]?.ipv4 ?? '', CLUSTER_IPS[name]?.ipv6 ?? ''];
const podOf = (result: ProbeResult | undefined) => result?.reply?.split(' ')[0];
const clientOf = (result: ProbeResult | undefined) => result?.reply?.split(' ')[1];

/** The samples of one kube_router_service_* series in /metrics text, by `service_name vip protocol port`. */
function serviceSeries(text: string, metric: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const match of text.matchAll(new RegExp(`^${metric}\\{([^}]*)\\} (\\S+)$`, 'gm'))) {
    const labels = Object.fromEntries([...(match[1] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((label) => [label[1], label[2]]));
    samples.set(`${labels.svc_namespace}/${labels.service_name} ${labels.service_vip} ${labels.protocol} ${labels.port}`, Number(match[2]));
  }
  return samples;
}

describe.skipIf(skip !== undefined)(`proxy-nftables on the host kernel${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const world = new NftProxyWorld();
  let proxy: ProxyHarness;
  let a: Pod;
  let b: Pod;
  let client: Pod;
  let healthCheckNodePort: number;

  const slices = (service: string, pods: readonly Pod[], ports?: Parameters<typeof sliceObject>[3], extra: Partial<EndpointInput> = {}): KubeObjectInput[] => [
    sliceObject(service, 'IPv4', pods.map((pod) => ({ ip: pod.ipv4, ...extra })), ports),
    sliceObject(service, 'IPv6', pods.map((pod) => ({ ip: pod.ipv6, ...extra })), ports),
  ];
  const sync = async (reason = 'test') => {
    const outcome = await proxy.controller.runObservedSync(reason);
    return outcome;
  };
  /** Waits until the informers hold what the API server has, then syncs (an event sync: only the changes are written). */
  const syncWhen = async (seen: () => boolean) => {
    for (let i = 0; i < 200 && !seen(); i++) await new Promise((resolve) => setTimeout(resolve, 25));
    expect(seen(), 'the informers saw the change').toBe(true);
    return sync();
  };
  const slice = (name: string) => proxy.kube.informers.endpointSlices().get('default', name);
  const nft = (args: string) => world.sh(`nft ${args}`, world.node);

  beforeAll(async () => {
    const started = performance.now();
    await world.setUp();
    a = await world.addPod('a', [8080, 5353]);
    b = await world.addPod('b', [8080, 5353]);
    client = await world.addPod('client');
    healthCheckNodePort = await freePort();
    const web = serviceObject({ name: 'web', clusterIPs: clusterIps('web'), type: 'NodePort', ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30080 }] });
    proxy = await startProxy(
      world.runner,
      { netns: world.node, enableIpv6: true, podCidrs: [POD_CIDRS.ipv4, POD_CIDRS.ipv6], syncPeriodMs: 600_000, commandTimeoutMs: 10_000 },
      [
        {
          apiVersion: 'v1',
          kind: 'Node',
          metadata: { name: NODE_NAME },
          spec: { podCIDRs: [POD_CIDRS.ipv4, POD_CIDRS.ipv6] },
          status: { addresses: [{ type: 'InternalIP', address: NODE_IPS.ipv4 }, { type: 'InternalIP', address: NODE_IPS.ipv6 }] },
        },
        web,
        ...slices('web', [a, b]),
        serviceObject({
          name: 'empty',
          clusterIPs: clusterIps('empty'),
          type: 'NodePort',
          ports: [
            { name: 'http', port: 80, targetPort: 8080, nodePort: 30081 },
            { name: 'dns', port: 53, targetPort: 5353, protocol: 'UDP' },
          ],
        }),
        serviceObject({
          name: 'local',
          clusterIPs: clusterIps('local'),
          type: 'LoadBalancer',
          externalTrafficPolicy: 'Local',
          healthCheckNodePort,
          ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30083 }],
        }),
        sliceObject('local', 'IPv4', [{ ip: a.ipv4 }, { ip: '10.244.1.9', node: 'elsewhere' }]),
        sliceObject('local', 'IPv6', [{ ip: a.ipv6 }, { ip: 'fd00:244:1::9', node: 'elsewhere' }]),
        serviceObject({
          name: 'lb',
          clusterIPs: clusterIps('lb'),
          type: 'LoadBalancer',
          ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30082 }],
          loadBalancerSourceRanges: [`${EXTERNAL_IPS.ipv4[0]}/32`, `${EXTERNAL_IPS.ipv6[0]}/128`],
        }),
        ...slices('lb', [a]),
        serviceObject({ name: 'sticky', clusterIPs: clusterIps('sticky'), sessionAffinitySeconds: 600 }),
        ...slices('sticky', [a, b]),
        serviceObject({ name: 'dns', clusterIPs: clusterIps('dns'), ports: [{ name: 'dns', port: 53, targetPort: 5353, protocol: 'UDP' }] }),
        ...slices('dns', [a, b], [{ name: 'dns', port: 5353, protocol: 'UDP' }]),
        serviceObject({ name: 'hairpin', clusterIPs: clusterIps('hairpin') }),
        ...slices('hairpin', [a]),
        serviceObject({ name: 'refused', clusterIPs: clusterIps('refused'), annotations: { 'kube-router.io/service.scheduler': 'sh' } }),
        ...slices('refused', [a]),
        serviceObject({
          name: 'counted',
          clusterIPs: clusterIps('counted'),
          type: 'NodePort',
          ports: [
            { name: 'http', port: 80, targetPort: 8080, nodePort: 30084 },
            { name: 'dns', port: 53, targetPort: 5353, protocol: 'UDP', nodePort: 30085 },
          ],
        }),
        ...slices('counted', [a], [
          { name: 'http', port: 8080 },
          { name: 'dns', port: 5353, protocol: 'UDP' },
        ]),
      ],
    );
    proxy.server.updateStatus({
      ...proxy.server.get('v1', 'Service', 'default', 'lb'),
      status: { loadBalancer: { ingress: [{ ip: LB_IPS.ipv4 }, { ip: LB_IPS.ipv6 }] } },
    } as KubeObjectInput);
    await syncWhen(() => (proxy.kube.informers.services().get('default', 'lb')?.status?.loadBalancer?.ingress?.length ?? 0) === 2);
    const outcome = await sync('initial');
    // The refused Service fails the sync alone: every other Service is programmed.
    expect(outcome.ok).toBe(false);
    expect(String(outcome.ok ? '' : outcome.error)).toContain('default/refused');
    console.info(`world and first syncs in ${Math.round(performance.now() - started)} ms; last sync ${JSON.stringify(proxy.controller.lastSync())}`);
  }, 120_000);

  afterAll(async () => {
    if (process.env.TPN_KEEP) return console.info(`kept ${world.node}`);
    await proxy?.close();
    await world.tearDown();
  }, 60_000);

  for (const family of FAMILIES) {
    // First of each family's tests: no other Service of this family has had traffic yet.
    it(`${family}: kube_router_service_* count a Service's connections, packets and bytes from the kernel's counters, and no other's`, async () => {
      const host = CLUSTER_IPS.counted?.[family] ?? '';
      const tcp = await world.probe(client.netns, { host, port: 80, count: 5 });
      expect(tcp.every((result) => result.ok), JSON.stringify(tcp)).toBe(true);
      const udp = await world.probe(client.netns, { host, port: 53, protocol: 'udp', count: 3 });
      expect(udp.every((result) => result.ok), JSON.stringify(udp)).toBe(true);
      const [nodePort] = await world.probe(world.outside, { host: NODE_IPS[family], port: 30084 });
      expect(nodePort?.ok, JSON.stringify(nodePort)).toBe(true);

      const started = performance.now();
      const text = await proxy.metrics.registry.metrics();
      const scrapeMs = performance.now() - started;
      const series = (metric: string) => serviceSeries(text, `kube_router_service_${metric}`);
      const [connections, packetsIn, packetsOut, bytesIn, bytesOut] = ['total_connections', 'packets_in', 'packets_out', 'bytes_in', 'bytes_out'].map(series) as Map<string, number>[];
      const clusterTcp = `default/counted ${host} tcp 80`;
      const clusterUdp = `default/counted ${host} udp 53`;
      const nodeTcp = `default/counted ${NODE_IPS[family]} tcp 30084`;
      expect(connections?.get(clusterTcp)).toBe(5);
      expect(connections?.get(clusterUdp)).toBe(3);
      expect(connections?.get(nodeTcp)).toBe(1);
      expect(connections?.get(`default/counted ${NODE_IPS[family]} udp 30085`)).toBe(0);
      // TCP: SYN, ACK, request, FIN... each way; UDP: one datagram in and its answer out per exchange.
      expect(packetsIn?.get(clusterTcp)).toBeGreaterThanOrEqual(5 * 3);
      expect(packetsOut?.get(clusterTcp)).toBeGreaterThanOrEqual(5 * 2);
      expect(packetsIn?.get(clusterUdp)).toBe(3);
      expect(packetsOut?.get(clusterUdp)).toBe(3);
      expect(bytesIn?.get(clusterTcp)).toBeGreaterThan(0);
      expect(bytesOut?.get(clusterTcp)).toBeGreaterThan(bytesOut?.get(clusterUdp) ?? 0);
      expect(bytesIn?.get(clusterUdp)).toBeGreaterThan(3 * 28);
      expect(packetsIn?.get(nodeTcp)).toBeGreaterThanOrEqual(3);
      expect(packetsOut?.get(nodeTcp)).toBeGreaterThanOrEqual(2);
      // Every other Service address of this family is there, at zero.
      const hairpin = `default/hairpin ${CLUSTER_IPS.hairpin?.[family]} tcp 80`;
      expect(connections?.get(hairpin)).toBe(0);
      const ofFamily = (key: string) => key.split(' ')[1]?.includes(':') === (family === 'ipv6');
      for (const samples of [connections, packetsIn, packetsOut, bytesIn, bytesOut]) {
        const busy = [...(samples ?? [])].filter(([key, value]) => ofFamily(key) && value > 0).map(([key]) => key.split(' ')[0]);
        expect(new Set(busy)).toEqual(new Set(['default/counted']));
      }
      // A full (periodic) sync writes every counter again without resetting it, and finds no drift in them.
      await sync('periodic');
      expect(proxy.controller.lastSync()?.writes[family]?.drift).toEqual({ chain: [], map_element: [], set: [] });
      expect(serviceSeries(await proxy.metrics.registry.metrics(), 'kube_router_service_total_connections').get(clusterTcp)).toBe(5);
      console.info(`${family}: /metrics with ${connections?.size} Service addresses read in ${scrapeMs.toFixed(0)} ms`);
    });

    it(`${family}: a ClusterIP reaches both pods and keeps the pod client's address`, async () => {
      const results = await world.probe(client.netns, { host: CLUSTER_IPS.web?.[family] ?? '', port: 80, count: 16 });
      expect(results.every((result) => result.ok), JSON.stringify(results)).toBe(true);
      expect(new Set(results.map(podOf))).toEqual(new Set(['a', 'b']));
      expect(clientOf(results[0])).toBe(client[family]);
    });

    it(`${family}: explains a flow to a Service: its endpoints, and the endpoint each probe reached, from conntrack`, async () => {
      const host = CLUSTER_IPS.web?.[family] ?? '';
      const results = await world.probe(client.netns, { host, port: 80, count: 6 });
      expect(results.every((result) => result.ok), JSON.stringify(results)).toBe(true);
      const path = await proxy.controller.explainServiceFlow({ source: client[family], destination: host, port: 80, protocol: 'TCP' });
      expect(path).toMatchObject({ service: 'default/web', portName: 'http', kind: 'cluster-ip' });
      expect(path?.via).toMatch(/^nftables ip6? kube-router-proxy TCP /);
      expect(new Set(path?.endpoints.map((endpoint) => `${endpoint.address}:${endpoint.port}`))).toEqual(new Set([`${a[family]}:8080`, `${b[family]}:8080`]));
      // conntrack names the pod each connection went to: the pods the probes reached, and no other.
      const podByAddress = new Map([[a[family], 'a'], [b[family], 'b']]);
      const reached = new Set(path?.connections.map((connection) => podByAddress.get(connection.endpoint.address)));
      expect(path?.connections.length).toBeGreaterThanOrEqual(results.length);
      expect(path?.connections.every((connection) => connection.client.address === client[family])).toBe(true);
      expect(reached).toEqual(new Set(results.map(podOf)));
      const nodePort = await proxy.controller.explainServiceFlow({ destination: NODE_IPS[family], port: 30080, protocol: 'TCP' });
      expect(nodePort).toMatchObject({ service: 'default/web', kind: 'node-port' });
      expect(await proxy.controller.explainServiceFlow({ destination: host, port: 81, protocol: 'TCP' })).toBeUndefined();
    });

    it(`${family}: a NodePort and a LoadBalancer IP reach a pod from outside, masqueraded`, async () => {
      const [nodePort] = await world.probe(world.outside, { host: NODE_IPS[family], port: 30080 });
      expect(nodePort?.ok, JSON.stringify(nodePort)).toBe(true);
      expect(['a', 'b']).toContain(podOf(nodePort));
      expect(clientOf(nodePort)).not.toBe(EXTERNAL_IPS[family][0]);
      const [lb] = await world.probe(world.outside, { host: LB_IPS[family], port: 80, source: EXTERNAL_IPS[family][0] });
      expect(lb?.ok, JSON.stringify(lb)).toBe(true);
      expect(podOf(lb)).toBe('a');
    });

    it(`${family}: loadBalancerSourceRanges drop a client outside them`, async () => {
      const [outside] = await world.probe(world.outside, { host: LB_IPS[family], port: 80, source: EXTERNAL_IPS[family][1], timeoutMs: 1_000 });
      expect(outside).toMatchObject({ ok: false, error: 'timeout' });
      // Its NodePort is not subject to them (as kube-proxy: ranges are the load balancer's).
      const [nodePort] = await world.probe(world.outside, { host: NODE_IPS[family], port: 30082, source: EXTERNAL_IPS[family][1] });
      expect(nodePort?.ok, JSON.stringify(nodePort)).toBe(true);
    });

    it(`${family}: a Service without endpoints is refused at once, TCP and UDP, ClusterIP and NodePort`, async () => {
      const [tcp] = await world.probe(client.netns, { host: CLUSTER_IPS.empty?.[family] ?? '', port: 80 });
      expect(tcp).toMatchObject({ ok: false, error: 'ECONNREFUSED' });
      expect(tcp?.ms, 'refused, not timed out (2 s)').toBeLessThan(1_000);
      const [nodePort] = await world.probe(world.outside, { host: NODE_IPS[family], port: 30081 });
      expect(nodePort).toMatchObject({ ok: false, error: 'ECONNREFUSED' });
      const [udp] = await world.probe(client.netns, { host: CLUSTER_IPS.empty?.[family] ?? '', port: 53, protocol: 'udp' });
      expect(udp).toMatchObject({ ok: false, error: 'ECONNREFUSED' });
      expect(udp?.ms, 'refused, not timed out (2 s)').toBeLessThan(1_000);
      // A port the Service does not have is not ours to refuse: it is routed on (here: to the outside namespace, which refuses).
      const [refusedService] = await world.probe(client.netns, { host: CLUSTER_IPS.refused?.[family] ?? '', port: 80, timeoutMs: 1_000 });
      expect(refusedService?.ok).toBe(false);
    });

    it(`${family}: externalTrafficPolicy Local keeps the client's address and uses only this node's endpoints`, async () => {
      const results = await world.probe(world.outside, { host: NODE_IPS[family], port: 30083, count: 6, source: EXTERNAL_IPS[family][0] });
      expect(results.every((result) => result.ok), JSON.stringify(results)).toBe(true);
      expect(new Set(results.map(podOf))).toEqual(new Set(['a']));
      expect(clientOf(results[0])).toBe(EXTERNAL_IPS[family][0]);
      // A pod reaching it gets the Cluster policy (the remote endpoint does not answer here: only a's replies count).
      const [fromPod] = await world.probe(client.netns, { host: CLUSTER_IPS.local?.[family] ?? '', port: 80 });
      expect(fromPod === undefined || !fromPod.ok || podOf(fromPod) === 'a').toBe(true);
    });

    it(`${family}: ClientIP affinity sticks to one pod`, async () => {
      const results = await world.probe(client.netns, { host: CLUSTER_IPS.sticky?.[family] ?? '', port: 80, count: 10 });
      expect(results.every((result) => result.ok), JSON.stringify(results)).toBe(true);
      expect(new Set(results.map(podOf)).size).toBe(1);
    });

    it(`${family}: a pod reaching itself through its Service is masqueraded (hairpin)`, async () => {
      const [result] = await world.probe(a.netns, { host: CLUSTER_IPS.hairpin?.[family] ?? '', port: 80 });
      expect(result?.ok, JSON.stringify(result)).toBe(true);
      expect(podOf(result)).toBe('a');
      expect(clientOf(result)).not.toBe(a[family]);
    });
  }

  it('serves healthCheckNodePort: 200 with the local endpoint count while there is one, 503 when none', async () => {
    const response = await fetch(`http://127.0.0.1:${healthCheckNodePort}/healthz`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ service: { namespace: 'default', name: 'local' }, localEndpoints: 1 });
    const before = slice('local-ipv4')?.metadata?.resourceVersion;
    proxy.server.update(sliceObject('local', 'IPv4', [{ ip: '10.244.1.9', node: 'elsewhere' }]));
    proxy.server.update(sliceObject('local', 'IPv6', [{ ip: 'fd00:244:1::9', node: 'elsewhere' }]));
    await syncWhen(() => slice('local-ipv4')?.metadata?.resourceVersion !== before && slice('local-ipv6')?.endpoints?.length === 1);
    const none = await fetch(`http://127.0.0.1:${healthCheckNodePort}/healthz`);
    expect(none.status).toBe(503);
    // No local endpoint: external traffic is dropped here (the load balancer's health check steers it away), not refused.
    const [dropped] = await world.probe(world.outside, { host: NODE_IPS.ipv4, port: 30083, timeoutMs: 1_000 });
    expect(dropped).toMatchObject({ ok: false, error: 'timeout' });
  });

  it('a removed endpoint gets no more traffic, and its UDP conntrack entries go', async () => {
    for (const family of FAMILIES) {
      const host = CLUSTER_IPS.dns?.[family] ?? '';
      // One UDP flow: the same source port each time, so that conntrack keeps sending it to one endpoint.
      const [first] = await world.probe(client.netns, { host, port: 53, protocol: 'udp', sourcePort: 40_053 });
      expect(first?.ok, JSON.stringify(first)).toBe(true);
      const served = podOf(first) === 'a' ? a : b;
      const other = served === a ? b : a;
      const entries = async () => world.sh(`conntrack -L -f ${family} -p udp --orig-port-src 40053 --reply-src ${served[family]} 2>/dev/null; true`, world.node);
      expect(await entries()).toContain(served[family]);
      const name = `dns-${family}`;
      const before = slice(name)?.metadata?.resourceVersion;
      proxy.server.update(sliceObject('dns', family === 'ipv4' ? 'IPv4' : 'IPv6', [{ ip: other[family] }], [{ name: 'dns', port: 5353, protocol: 'UDP' }]));
      const outcome = await syncWhen(() => slice(name)?.metadata?.resourceVersion !== before);
      expect(outcome.ok).toBe(false); // default/refused still fails, alone
      expect(proxy.controller.lastSync()?.writes[family]?.mode).toBe('partial');
      expect(proxy.controller.lastSync()?.conntrackDeleted).toBeGreaterThan(0);
      expect(await entries()).not.toContain(served[family]);
      const after = await world.probe(client.netns, { host, port: 53, protocol: 'udp', sourcePort: 40_053, count: 3 });
      expect(after.map(podOf)).toEqual([other.name, other.name, other.name]);
    }
  });

  it('an event sync writes only the changed chains and elements; a full sync repairs drift and reports it', async () => {
    const before = slice('web-ipv4')?.metadata?.resourceVersion;
    proxy.server.update(sliceObject('web', 'IPv4', [{ ip: a.ipv4 }]));
    await syncWhen(() => slice('web-ipv4')?.metadata?.resourceVersion !== before);
    const report = proxy.controller.lastSync();
    expect(report?.writes.ipv4).toMatchObject({ mode: 'partial' });
    // The web chain, the flush of b's endpoint chain: a handful of statements, not the table.
    expect(report?.writes.ipv4?.operations).toBeLessThan(10);
    expect(report?.writes.ipv6).toMatchObject({ mode: 'unchanged' });
    const results = await world.probe(client.netns, { host: CLUSTER_IPS.web?.ipv4 ?? '', port: 80, count: 8 });
    expect(results.map(podOf)).toEqual(Array(8).fill('a'));

    // Someone deletes the ClusterIP's element and a service chain's rules.
    await nft(`delete element ip kube-router-proxy service-ips '{ ${CLUSTER_IPS.sticky?.ipv4} . tcp . 80 }'`);
    const [broken] = await world.probe(client.netns, { host: CLUSTER_IPS.sticky?.ipv4 ?? '', port: 80, timeoutMs: 1_000 });
    expect(broken?.ok).toBe(false);
    await sync('periodic');
    expect(proxy.controller.lastSync()?.writes.ipv4?.drift?.map_element).toEqual([`service-ips: ${CLUSTER_IPS.sticky?.ipv4} . tcp . 80`]);
    const metrics = await proxy.metrics.registry.getSingleMetricAsString('kube_router_controller_drift_repaired_total');
    expect(metrics).toMatch(/object="map_element"} 1/);
    const [repaired] = await world.probe(client.netns, { host: CLUSTER_IPS.sticky?.ipv4 ?? '', port: 80 });
    expect(repaired?.ok, JSON.stringify(repaired)).toBe(true);
  });

  it('a restarted controller adopts the table: the same rules, written without a gap', async () => {
    // Counts move with the probes meanwhile: compared without them.
    const table = async () => (await nft('list table ip kube-router-proxy')).replace(/ expires \S+/g, '').replace(/packets \d+ bytes \d+/g, '');
    const before = await table();
    const server = proxy.server;
    // The old controller goes (its informers with it); the API server stays for the new one.
    await proxy.controller.stop();
    await proxy.kube.informers.stop();
    const [during] = await world.probe(client.netns, { host: CLUSTER_IPS.web?.ipv4 ?? '', port: 80 });
    expect(during?.ok, 'Services answer while no proxy runs').toBe(true);
    const restarted = await startProxy(world.runner, { netns: world.node, enableIpv6: true, podCidrs: [POD_CIDRS.ipv4, POD_CIDRS.ipv6], syncPeriodMs: 600_000 }, [], server);
    proxy = { ...restarted, close: async () => { await restarted.close(); await server.close(); } };
    await sync('initial');
    expect(proxy.controller.lastSync()?.writes.ipv4).toMatchObject({ mode: 'full', drift: undefined });
    expect(await table()).toBe(before);
    const [after] = await world.probe(client.netns, { host: CLUSTER_IPS.web?.ipv4 ?? '', port: 80 });
    expect(after?.ok).toBe(true);
    // The counters were adopted with their counts: the series go on where they were.
    const connections = serviceSeries(await proxy.metrics.registry.metrics(), 'kube_router_service_total_connections');
    expect(connections.get(`default/counted ${CLUSTER_IPS.counted?.ipv4} tcp 80`)).toBe(5);
  });

  it('--cleanup-config removes both tables and nothing else', async () => {
    await nft('add table ip someone-else');
    const plugin = createProxyNftablesPlugin({ runner: world.runner });
    await plugin.cleanup?.({ nodeName: NODE_NAME, logger: pino({ level: 'silent' }) }, plugin.options.parse({ netns: world.node }));
    expect((await nft('list tables')).trim()).toBe('table ip someone-else');
    const [gone] = await world.probe(client.netns, { host: CLUSTER_IPS.web?.ipv4 ?? '', port: 80, timeoutMs: 1_000 });
    expect(gone?.ok).toBe(false);
  });
});
