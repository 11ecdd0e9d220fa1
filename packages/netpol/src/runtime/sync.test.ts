import { SyncFailures } from '@kube-router/controller';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { compileNetworkPolicies } from '../compiler.js';
import type { NamespaceLike, NetworkPolicyLike, PodLike } from '../types.js';
import { netpolFamilies, netpolOptionFields } from './options.js';
import { ownChainPattern, ownSetPattern, policyChainName, stableHash } from './names.js';
import type { NetpolSources } from './sources.js';
import { SyncWarnings } from '@kube-router/controller';
import { DefaultDenyPodCidrs, PolicyRenders, reportRefusedPolicies } from './sync.js';

const pods = [
  { metadata: { namespace: 'web', name: 'server', labels: { app: 'server' } }, spec: { nodeName: 'node-a', containers: [] }, status: { phase: 'Running', podIP: '10.0.0.2', podIPs: [{ ip: '10.0.0.2' }] } },
] as PodLike[];
const namespaces = [{ metadata: { name: 'web', labels: {} } }] as NamespaceLike[];
/** A policy on web/server that allows all ingress, or none. */
const policyOf = (name: string, allow: 'all' | 'none') =>
  ({ metadata: { namespace: 'web', name }, spec: { podSelector: { matchLabels: { app: 'server' } }, ingress: allow === 'all' ? [{}] : [] } }) as NetworkPolicyLike;

describe('PolicyRenders', () => {
  it('keeps a policy’s render object while its fingerprint holds, renders it again when it changes, forgets it when it goes', async () => {
    let renders = 0;
    const cache = new PolicyRenders((policy) => ({ id: policy.id, serial: ++renders }));
    const model = (list: NetworkPolicyLike[]) => compileNetworkPolicies({ nodeName: 'node-a', pods, namespaces, policies: list });
    const first = await cache.update(model([policyOf('a', 'all'), policyOf('b', 'all')]), () => undefined);
    const second = await cache.update(model([policyOf('a', 'all'), policyOf('b', 'none')]), () => undefined);
    expect(second[0]).toBe(first[0]);
    expect(second[1]).not.toBe(first[1]);
    await cache.update(model([policyOf('b', 'none')]), () => undefined);
    const back = await cache.update(model([policyOf('a', 'all'), policyOf('b', 'none')]), () => undefined);
    expect(back[0]).not.toBe(first[0]);
    expect(renders).toBe(4);
  });

  it('keeps the render of the same policy object without working out any fingerprint', async () => {
    const [policy] = compileNetworkPolicies({ nodeName: 'node-a', pods, namespaces, policies: [policyOf('a', 'all')] }).policies;
    let reads = 0;
    const counted = new Proxy(policy!, {
      get: (target, key) => {
        if (key === 'fingerprint') reads++;
        // The policy itself as the receiver: its fingerprint getter reads a private field, which a proxy lacks.
        return Reflect.get(target, key, target);
      },
    });
    const cache = new PolicyRenders((compiled) => ({ id: compiled.id }));
    const model = { nodeName: 'node-a', policies: [counted], pods: [], problems: [], podProblems: [], fingerprint: '' };
    const first = await cache.update(model, () => undefined);
    const second = await cache.update(model, () => undefined);
    expect(second[0]).toBe(first[0]);
    expect(reads).toBe(0);
  });
});

describe('reportRefusedPolicies', () => {
  it('turns refused policies into failures of the sync, failed-closed ids and NetworkPolicyNotProgrammed events', () => {
    const events: string[] = [];
    const warnings = new SyncWarnings((namespace, name, reason, message) => events.push(`${namespace}/${name} ${reason}: ${message}`));
    const failures = new SyncFailures();
    const failedClosed = new Set<string>();
    warnings.beginSync();
    reportRefusedPolicies(new Map([['web/a', new Error('Could not process rule')]]), failures, failedClosed, warnings);
    expect(failures.size).toBe(1);
    expect([...failedClosed]).toEqual(['web/a']);
    expect(events[0]).toMatch(/^web\/a NetworkPolicyNotProgrammed: .*Could not process rule/);
  });
});

describe('DefaultDenyPodCidrs', () => {
  const sources = (node: ReturnType<NonNullable<NetpolSources['node']>>): NetpolSources => ({
    pods: () => [],
    namespaces: () => [],
    policies: () => [],
    hasSynced: () => true,
    onChange: () => () => undefined,
    warnPolicy: () => undefined,
    node: () => node,
  });

  it("reads the Node's pod CIDRs, and fails the sync (returning none) when it has none", () => {
    const failures = new SyncFailures();
    expect(new DefaultDenyPodCidrs().read(sources({ spec: { podCIDRs: ['10.0.0.0/24', 'fd00::/64'] } }), 'node-a', failures)).toEqual(['10.0.0.0/24', 'fd00::/64']);
    expect(failures.size).toBe(0);
    expect(new DefaultDenyPodCidrs().read(sources({ spec: {} }), 'node-a', failures)).toEqual([]);
    expect(failures.list[0]?.object).toBe('default-deny');
  });

  it('keeps the CIDRs last read through a sync that cannot read them, and says so', () => {
    const cidrs = new DefaultDenyPodCidrs();
    cidrs.read(sources({ spec: { podCIDRs: ['10.0.0.0/24'] } }), 'node-a', new SyncFailures());
    const failures = new SyncFailures();
    // The Node gone from the cache for a moment: the tail must not lose its reject rules (that would fail open).
    expect(cidrs.read(sources(undefined), 'node-a', failures)).toEqual(['10.0.0.0/24']);
    expect(failures.list[0]?.object).toBe('default-deny');
    expect(String(failures.list[0]?.error)).toContain('the pod CIDRs last read (10.0.0.0/24) still apply');
    expect(cidrs.read(sources({ spec: { podCIDRs: ['10.0.1.0/24'] } }), 'node-a', new SyncFailures())).toEqual(['10.0.1.0/24']);
  });
});

describe('options and names', () => {
  it('enforces for the enabled families in order and refuses neither', () => {
    expect(netpolFamilies({ enableIpv4: true, enableIpv6: true })).toEqual(['ipv4', 'ipv6']);
    expect(netpolFamilies({ enableIpv4: false, enableIpv6: true })).toEqual(['ipv6']);
    expect(() => netpolFamilies({ enableIpv4: false, enableIpv6: false })).toThrow(/both false/);
    expect(netpolOptionFields.nodePortRange.safeParse('32767-30000').success).toBe(false);
  });

  it("defaults to IPv4 alone, as kube-router's --enable-ipv6 does, and refuses a range that is not a CIDR when parsed", () => {
    const options = z.strictObject(netpolOptionFields);
    expect(netpolFamilies(options.parse({}))).toEqual(['ipv4']);
    expect(options.safeParse({ serviceClusterIpRanges: ['10.96.0.0/12', 'fd00:96::/108'] }).success).toBe(true);
    expect(options.safeParse({ serviceExternalIpRanges: ['999.0.0.0/8'] }).success).toBe(false);
  });

  it('owns chains and sets by exact name: fixed names and prefixes followed by a hash, never a prefix alone', () => {
    const chains = ownChainPattern(['KUBE-EXTRA-']);
    for (const name of ['KUBE-ROUTER-FORWARD', 'KUBE-NWPLCY-TAIL', policyChainName('web/a', 'ingress', 'ipv4'), `KUBE-EXTRA-${stableHash('x')}`]) {
      expect(chains.test(name), name).toBe(true);
    }
    for (const name of ['KUBE-ROUTER-SERVICES', 'KUBE-NWPLCY-NOT-OURS', 'KUBE-POD-FW-']) expect(chains.test(name), name).toBe(false);
    const sets = ownSetPattern(['kube-router-local-pods']);
    expect(sets.test(`KUBE-SRC-${stableHash('x')}`)).toBe(true);
    expect(sets.test('kube-router-local-pods')).toBe(true);
    expect(sets.test('KUBE-SRC-FOO')).toBe(false);
  });

  it('names alike on every call (the hash is remembered, not changed)', () => {
    expect(stableHash('policy', 'web/a', 'ingress', 'ipv4')).toMatch(/^[0-9A-F]{16}$/);
    expect(policyChainName('web/a', 'ingress', 'ipv4')).toBe(`KUBE-NWPLCY-${stableHash('policy', 'web/a', 'ingress', 'ipv4')}`);
    expect(policyChainName('web/a', 'ingress', 'ipv4')).toBe(policyChainName('web/a', 'ingress', 'ipv4'));
  });
});
