import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { buildProxyModel, createModelCache } from './model.js';
import { createRenderCache, renderTable } from './render.js';
import type { RenderOptions } from './render.js';
import { diffScript, driftOf, fullScript } from './script.js';
import { node, service, slice } from './testing/objects.js';

const RENDER: RenderOptions = { family: 'ipv4', podCidrs: ['10.244.0.0/16'], masqueradeAll: false, nodePortBindOnAllIp: false };

function table(services: V1Service[], slices: Record<string, V1EndpointSlice[]> = {}, options: Partial<RenderOptions> = {}) {
  const model = buildProxyModel(
    { services, slicesFor: (_namespace, name) => slices[name] ?? [], node: node(), nodeName: 'node-a' },
    { families: ['ipv4'], nodePortBindOnAllIp: false, serviceProxyName: 'kube-router' },
  );
  return renderTable(model.ports.ipv4, model.nodePortAddresses.ipv4, { ...RENDER, ...options });
}

const chainsStarting = (state: ReturnType<typeof table>, prefix: string) => [...state.chains].filter(([name]) => name.startsWith(prefix));

describe('renderTable', () => {
  it('dispatches a ClusterIP through service-ips to a chain that picks an endpoint chain at random', () => {
    const state = table([service('web')], { web: [slice([{ ip: '10.244.0.5' }, { ip: '10.244.1.5', node: 'node-b' }])] });
    const [[clusterChain, rules] = ['', []]] = chainsStarting(state, 'service-');
    expect(clusterChain).toMatch(/^service-[A-Z2-7]{8}-default\/web\/tcp\/http$/);
    expect(state.maps['service-ips'].get('10.96.0.10 . tcp . 80')).toBe(`goto ${clusterChain}`);
    expect(rules[0]).toBe('ip daddr 10.96.0.10 tcp dport 80 ip saddr != { 10.244.0.0/16 } jump mark-for-masquerade');
    expect(rules[1]).toMatch(/^numgen random mod 2 vmap \{ 0 : goto endpoint-.*__10\.244\.0\.5\/8080, 1 : goto endpoint-.*__10\.244\.1\.5\/8080 \}$/);
    const endpoints = chainsStarting(state, 'endpoint-');
    expect(endpoints.map(([, chain]) => chain)).toEqual([
      ['ip saddr 10.244.0.5 jump mark-for-masquerade', 'meta l4proto tcp dnat to 10.244.0.5:8080'],
      ['ip saddr 10.244.1.5 jump mark-for-masquerade', 'meta l4proto tcp dnat to 10.244.1.5:8080'],
    ]);
  });

  it('rejects a Service port without endpoints, and drops one whose Local policy has no local endpoint', () => {
    const state = table(
      [service('empty', { type: 'NodePort', ports: [{ name: 'http', port: 80, nodePort: 30080 }] }), service('local', { clusterIP: '10.96.0.11', internalTrafficPolicy: 'Local' })],
      { local: [slice([{ ip: '10.244.1.5', node: 'node-b' }])] },
    );
    expect(state.maps['no-endpoint-services'].get('10.96.0.10 . tcp . 80')).toBe('goto reject-chain');
    expect(state.maps['no-endpoint-nodeports'].get('tcp . 30080')).toBe('goto reject-chain');
    expect(state.maps['no-endpoint-services'].get('10.96.0.11 . tcp . 80')).toBe('drop');
    expect(state.maps['service-ips'].size).toBe(0);
  });

  it('writes affinity sets, their lookups before the random choice and their updates in the endpoint chains', () => {
    const state = table([service('web', { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 60 } } })], { web: [slice([{ ip: '10.244.0.5' }])] });
    expect([...state.affinitySets.values()]).toEqual([60]);
    const [set = ''] = state.affinitySets.keys();
    expect(set).toMatch(/^affinity-[A-Z2-7]{8}-default\/web\/tcp\/http__10\.244\.0\.5\/8080$/);
    const [[, rules = []] = []] = chainsStarting(state, 'service-');
    expect(rules[1]).toMatch(new RegExp(`^ip saddr @${set.replaceAll('/', '\\/').replaceAll('.', '\\.')} goto endpoint-`));
    const [[, endpoint = []] = []] = chainsStarting(state, 'endpoint-');
    expect(endpoint[1]).toBe(`update @${set} { ip saddr }`);
    // Another timeout is another set: the kernel cannot change a set's timeout in place.
    const longer = table([service('web', { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 120 } } })], { web: [slice([{ ip: '10.244.0.5' }])] });
    expect([...longer.affinitySets.keys()]).not.toEqual([set]);
  });

  it('keeps the client address for externalTrafficPolicy Local, short-circuiting pods and the node to the Cluster chain', () => {
    const state = table([service('lb', { type: 'NodePort', externalTrafficPolicy: 'Local', ports: [{ name: 'http', port: 80, nodePort: 30080 }] })], {
      lb: [slice([{ ip: '10.244.0.5' }, { ip: '10.244.1.5', node: 'node-b' }])],
    });
    const [[external, rules = []] = []] = chainsStarting(state, 'external-');
    expect(state.maps['service-nodeports'].get('tcp . 30080')).toBe(`goto ${external}`);
    expect(rules).toEqual([
      expect.stringMatching(/^ip saddr \{ 10\.244\.0\.0\/16 \} goto service-/),
      'fib saddr type local jump mark-for-masquerade',
      expect.stringMatching(/^fib saddr type local goto service-/),
      expect.stringMatching(/^goto local-/),
    ]);
    const [[, local = []] = []] = chainsStarting(state, 'local-');
    expect(local).toEqual([expect.stringMatching(/^numgen random mod 1 vmap \{ 0 : goto endpoint-.*10\.244\.0\.5/)]);
  });

  it('firewalls LoadBalancer IPs with source ranges; masquerades everything with masqueradeAll', () => {
    const status = { loadBalancer: { ingress: [{ ip: '198.51.100.1' }] } };
    const state = table([service('lb', { type: 'LoadBalancer', loadBalancerSourceRanges: ['203.0.113.0/24'] }, { status })], { lb: [slice([{ ip: '10.244.0.5' }])] }, { masqueradeAll: true });
    const [[firewall, rules] = ['', []]] = chainsStarting(state, 'firewall-');
    expect(rules).toEqual(['ip saddr != { 203.0.113.0/24 } drop']);
    expect(state.maps['firewall-ips'].get('198.51.100.1 . tcp . 80')).toBe(`goto ${firewall}`);
    const [[, cluster = []] = []] = chainsStarting(state, 'service-');
    expect(cluster[0]).toBe('ip daddr 10.96.0.10 tcp dport 80 jump mark-for-masquerade');
  });

  it('short-circuits pods and the node to the Cluster endpoints when both traffic policies are Local', () => {
    const state = table([service('lb', { type: 'NodePort', internalTrafficPolicy: 'Local', externalTrafficPolicy: 'Local', ports: [{ name: 'http', port: 80, nodePort: 30080 }] })], {
      lb: [slice([{ ip: '10.244.0.5' }, { ip: '10.244.1.5', node: 'node-b' }])],
    });
    const [[cluster, clusterRules = []] = []] = chainsStarting(state, 'service-');
    expect(clusterRules).toEqual([expect.stringMatching(/^numgen random mod 2 vmap .*10\.244\.0\.5.*10\.244\.1\.5/)]);
    const [[, rules = []] = []] = chainsStarting(state, 'external-');
    expect(rules).toEqual([`ip saddr { 10.244.0.0/16 } goto ${cluster}`, 'fib saddr type local jump mark-for-masquerade', `fib saddr type local goto ${cluster}`, expect.stringMatching(/^goto local-/)]);
    // The ClusterIP itself follows internalTrafficPolicy Local.
    expect(state.maps['service-ips'].get('10.96.0.10 . tcp . 80')).toMatch(/^goto local-/);
  });

  it('drops every source on a family’s LoadBalancer IPs when the Service has source ranges of the other family only', () => {
    const status = { loadBalancer: { ingress: [{ ip: '198.51.100.1' }] } };
    const state = table([service('lb', { type: 'LoadBalancer', loadBalancerSourceRanges: ['2001:db8:1::/48'] }, { status })], { lb: [slice([{ ip: '10.244.0.5' }])] });
    const [[firewall, rules] = ['', []]] = chainsStarting(state, 'firewall-');
    expect(rules).toEqual(['drop']);
    expect(state.maps['firewall-ips'].get('198.51.100.1 . tcp . 80')).toBe(`goto ${firewall}`);
    expect(chainsStarting(table([service('lb', { type: 'LoadBalancer' }, { status })], { lb: [slice([{ ip: '10.244.0.5' }])] }), 'firewall-')).toEqual([]);
  });

  it('renders IPv6 with ip6 matches and bracketed DNAT targets; NodePorts on every local address with nodePortBindOnAllIp', () => {
    const model = buildProxyModel(
      { services: [service('web', { clusterIP: 'fd00:96::1', clusterIPs: ['fd00:96::1'] })], slicesFor: () => [slice([{ ip: 'fd00:244::5' }], undefined, 'IPv6')], node: node(), nodeName: 'node-a' },
      { families: ['ipv6'], nodePortBindOnAllIp: true, serviceProxyName: 'kube-router' },
    );
    const state = renderTable(model.ports.ipv6, [], { family: 'ipv6', podCidrs: [], masqueradeAll: false, nodePortBindOnAllIp: true });
    expect([...state.chains.values()].flat()).toContain('meta l4proto tcp dnat to [fd00:244::5]:8080');
    expect(state.base).toContain('add rule T services fib daddr type local ip6 daddr != ::1 meta l4proto . th dport vmap @service-nodeports');
    expect(state.nodePortIps.size).toBe(0);
  });
});

describe('scripts', () => {
  const one = table([service('web')], { web: [slice([{ ip: '10.244.0.5' }, { ip: '10.244.0.6' }])] });
  const two = table([service('web')], { web: [slice([{ ip: '10.244.0.5' }])] });

  it('writes only the changes: the Service chain, the gone endpoint chain flushed, nothing of the fixed part', () => {
    const diff = diffScript('ip t', one, two);
    expect(diff.script).not.toContain('add table');
    expect(diff.script).not.toContain('service-ips');
    expect(diff.staleChains).toEqual([expect.stringContaining('10.244.0.6')]);
    expect(diff.script.split('\n').filter(Boolean)).toEqual([
      expect.stringMatching(/^flush chain ip t service-/),
      expect.stringMatching(/^add rule ip t service-.* jump mark-for-masquerade$/),
      expect.stringMatching(/^add rule ip t service-.*numgen random mod 1/),
      expect.stringMatching(/^flush chain ip t endpoint-.*10\.244\.0\.6/),
    ]);
    expect(diff.operations).toBe(4);
    expect(diffScript('ip t', two, two).script).toBe('');
  });

  it('a full write flushes and refills every map, and flushes listed Service chains it no longer has', () => {
    const { script, staleChains } = fullScript('ip t', two, { chains: new Set([...one.chains.keys(), 'services']), sets: new Set(['affinity-X-a/b/tcp/p__1.2.3.4/80']) });
    expect(script).toContain('add table ip t\n');
    expect(script).toContain('flush map ip t service-ips\n');
    expect(staleChains).toEqual([expect.stringContaining('10.244.0.6')]);
    expect(script).toContain('delete set ip t affinity-X-a/b/tcp/p__1.2.3.4/80\n');
  });

  it('finds drift: a missing element, a foreign Service chain, a chain with other rules', () => {
    const [web = ''] = [...one.chains.keys()].filter((name) => name.startsWith('service-'));
    const listing = {
      tables: [],
      counters: [],
      chains: [...[...one.baseRuleCounts.keys()], ...one.chains.keys(), 'service-ZZZZZZZZ-x/y/tcp/p'].map((name, handle) => ({ family: 'ip', table: 't', name, handle })),
      rules: [
        ...[...one.baseRuleCounts].flatMap(([chain, count]) => Array.from({ length: count }, () => ({ family: 'ip', table: 't', chain, handle: 1, expr: [] }))),
        ...[...one.chains].flatMap(([chain, rules]) => (chain === web ? rules.slice(1) : rules).map(() => ({ family: 'ip', table: 't', chain, handle: 1, expr: [] }))),
      ],
      sets: [{ family: 'ip', table: 't', name: 'nodeport-ips', handle: 1, type: 'ipv4_addr', flags: [], elements: ['192.168.1.1'] }],
      // The counter maps as nft lists them (names unquoted): no drift, whatever the counts.
      maps: (['service-connection-counters', 'service-in-counters', 'service-out-counters'] as const).map((name) => ({
        family: 'ip',
        table: 't',
        name,
        handle: 1,
        type: ['ipv4_addr', 'inet_proto', 'inet_service'],
        flags: [],
        elements: [...one.maps[name].keys()],
        map: 'counter',
        entries: [...one.maps[name]].map(([key, counter]) => `${key} : ${counter}`),
      })),
    };
    const drift = driftOf(listing, one, new Set());
    expect(drift.chain.sort()).toEqual([web, 'service-ZZZZZZZZ-x/y/tcp/p'].sort());
    expect(drift.map_element).toEqual(['service-ips: 10.96.0.10 . tcp . 80']);
    expect(drift.set).toEqual([]);
  });
});

describe('caches', () => {
  it('reuse an unchanged Service’s plans and rendering, so an event diff looks only at the changed Service', () => {
    const services = [service('a', { clusterIP: '10.96.0.1' }), service('b', { clusterIP: '10.96.0.2' })];
    const slices: Record<string, V1EndpointSlice[]> = { a: [slice([{ ip: '10.244.0.5' }])], b: [slice([{ ip: '10.244.0.6' }])] };
    const modelCache = createModelCache();
    const renderCache = createRenderCache();
    const build = () => {
      const model = buildProxyModel({ services, slicesFor: (_namespace, name) => slices[name] ?? [], node: node(), nodeName: 'node-a' }, { families: ['ipv4'], nodePortBindOnAllIp: false, serviceProxyName: 'kube-router' }, modelCache);
      return { model, state: renderTable(model.groups.ipv4, model.nodePortAddresses.ipv4, RENDER, renderCache) };
    };
    const first = build();
    slices.b = [slice([{ ip: '10.244.0.7' }])];
    const second = build();
    expect(second.model.groups.ipv4.get('default/a')).toBe(first.model.groups.ipv4.get('default/a'));
    expect(second.state.fragments.get('default/a')).toBe(first.state.fragments.get('default/a'));
    expect(second.state.fragments.get('default/b')).not.toBe(first.state.fragments.get('default/b'));
    const diff = diffScript('ip t', first.state, second.state);
    expect(diff.script).not.toContain('default/a/');
    expect(diff.script).toContain('10.244.0.7');
  });
});

