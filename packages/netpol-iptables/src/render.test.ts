import { describe, expect, it } from 'vitest';
import { TOP_CHAINS, ipBlockSetName, namedPortSetName, peerPodSetName, targetSetName } from './names.js';
import { COMMON_CHAIN, ruleSetKey, podChainName, policyChainName } from '@kube-router/netpol';
import { renderNode } from './render-node.js';
import { renderPolicy } from './render-policy.js';
import { compileSmallCluster as smallCluster, serverFromClientsPolicy } from '@kube-router/netpol-testing';
import { fixturePolicy as policy } from '@kube-router/testkit/netpol-conformance';

const NODE_OPTIONS = {
  defaultDeny: false,
  serviceClusterIpRanges: ['10.96.0.0/12', 'fd00:96::/108'],
  serviceExternalIpRanges: ['192.0.2.0/24'],
  nodePortRange: '30000-32767',
};

const serverFromClients = serverFromClientsPolicy();

describe('names', () => {
  it('come from identity, not content, and fit the kernel limits', () => {
    expect(policyChainName('web/a', 'ingress', 'ipv4')).toBe(policyChainName('web/a', 'ingress', 'ipv4'));
    const names = new Set([
      policyChainName('web/a', 'ingress', 'ipv4'),
      policyChainName('web/a', 'ingress', 'ipv6'),
      policyChainName('web/a', 'egress', 'ipv4'),
      policyChainName('web/b', 'ingress', 'ipv4'),
      podChainName('web/a', 'ingress', 'ipv4'),
    ]);
    expect(names.size).toBe(5);
    for (const name of names) expect(name.length).toBeLessThanOrEqual(28);
    expect(targetSetName('web/a', 'ipv6').length).toBeLessThanOrEqual(31);
    expect(ipBlockSetName('web/a', 'egress', '3|TCP:80-', '2001:db8::/32', 'ipv4').length).toBeLessThanOrEqual(31);
  });

  it('stay the same when the policy content changes', () => {
    const before = renderPolicy(smallCluster([serverFromClients]).policies[0]!, ['ipv4']);
    const changed = policy('web/server-from-clients', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ podSelector: {} }] }],
    });
    const after = renderPolicy(smallCluster([changed]).policies[0]!, ['ipv4']);
    expect(after.families.ipv4?.chains.map((c) => c.name)).toEqual(before.families.ipv4?.chains.map((c) => c.name));
    expect(after.families.ipv4?.chains[0]?.digest).not.toBe(before.families.ipv4?.chains[0]?.digest);
  });
});

describe('renderPolicy', () => {
  const model = smallCluster([serverFromClients]);
  const compiled = model.policies[0]!;
  const rendered = renderPolicy(compiled, ['ipv4', 'ipv6']);

  it('is deterministic', () => {
    expect(renderPolicy(smallCluster([serverFromClients]).policies[0]!, ['ipv4', 'ipv6'])).toEqual(rendered);
  });

  it('matches peers, ipBlocks with excepts and named ports through sets', () => {
    const v4 = rendered.families.ipv4!;
    expect(v4.chains).toHaveLength(1);
    const chain = v4.chains[0]!;
    expect(chain.name).toBe(policyChainName('web/server-from-clients', 'ingress', 'ipv4'));
    const rule = compiled.ingress.rules[0]!;
    const peers = peerPodSetName(compiled.id, 'ingress', ruleSetKey(rule), 'ipv4');
    const block = ipBlockSetName(compiled.id, 'ingress', ruleSetKey(rule), '192.168.0.0/16', 'ipv4');
    const named = namedPortSetName(compiled.id, 'ingress', 0, 'http/TCP/8080', 'ipv4');
    const target = targetSetName(compiled.id, 'ipv4');
    const sets = new Map(v4.sets.map((set) => [set.spec.name, set]));
    expect(sets.get(target)?.members).toEqual(['10.0.0.2']);
    expect([...(sets.get(peers)?.members ?? [])].sort()).toEqual(['10.0.0.3', '10.0.1.3']);
    expect(sets.get(block)?.spec.type).toBe('hash:net');
    expect(sets.get(block)?.members).toEqual(['192.168.0.0/16', { element: '192.168.1.0/24', nomatch: true }]);
    expect(sets.get(named)?.members).toEqual(['10.0.0.2']);
    // Two peer matches times two port matches, each a MARK and a RETURN.
    expect(chain.rules).toHaveLength(8);
    expect(chain.rules.find((rule) => rule.includes(named))).toContain(`-m set --match-set ${target} dst -m set --match-set ${peers} src -p tcp -m tcp --dport 8080 -m set --match-set ${named} dst -j MARK --set-xmark 0x10000/0x10000`);
    expect(chain.rules.filter((rule) => rule.includes(named))[1]).toMatch(/-m mark --mark 0x10000\/0x10000 -j RETURN$/);
    expect(chain.rules.some((rule) => rule.includes('-p udp -m udp --dport 9000:9010'))).toBe(true);
  });

  it('renders IPv6 with inet6 sets and without the IPv4-only ipBlock', () => {
    const v6 = rendered.families.ipv6!;
    expect(v6.sets.every((set) => set.spec.family === 'ipv6')).toBe(true);
    expect(v6.sets.some((set) => set.spec.type === 'hash:net')).toBe(false);
    expect(v6.chains[0]?.rules).toHaveLength(4);
  });

  it('gives a direction that failed to compile no chain', () => {
    const broken = smallCluster([
      policy('web/broken', { podSelector: {}, ingress: [{ from: [{ ipBlock: { cidr: 'nonsense' } }] }] }),
    ]);
    const render = renderPolicy(broken.policies[0]!, ['ipv4']);
    expect(render.families.ipv4?.chains).toEqual([]);
  });
});

describe('renderNode', () => {
  it('jumps to pod chains from the top-level chains and hands service traffic on', () => {
    const model = smallCluster([serverFromClients]);
    const chains = renderNode(model, 'ipv4', NODE_OPTIONS);
    const byName = new Map(chains.map((chain) => [chain.name, chain.rules]));
    const podChain = podChainName('web/server', 'ingress', 'ipv4');
    expect(byName.get(TOP_CHAINS.FORWARD)?.some((rule) => rule.includes(`-d 10.0.0.2 -j ${podChain}`))).toBe(true);
    expect(byName.get(TOP_CHAINS.OUTPUT)?.some((rule) => rule.includes(`-d 10.0.0.2 -j ${podChain}`))).toBe(true);
    const input = byName.get(TOP_CHAINS.INPUT) ?? [];
    expect(input.some((rule) => rule.includes('-d 10.96.0.0/12 -j RETURN'))).toBe(true);
    expect(input.some((rule) => rule.includes('fd00:96::/108'))).toBe(false);
    expect(input.some((rule) => rule.includes('--dports 30000:32767'))).toBe(true);
    expect(input.some((rule) => rule.includes('-d 192.0.2.0/24 -j RETURN'))).toBe(true);
    const rules = byName.get(podChain) ?? [];
    expect(rules[0]).toContain(`-j ${COMMON_CHAIN}`);
    expect(rules.some((rule) => rule.includes(policyChainName('web/server-from-clients', 'ingress', 'ipv4')))).toBe(true);
    const nflog = rules.findIndex((rule) => rule.includes('-j NFLOG --nflog-group 100'));
    const reject = rules.findIndex((rule) => rule.includes('-j REJECT'));
    expect(nflog).toBeGreaterThan(0);
    expect(reject).toBe(nflog + 1);
    // Nothing isolates the client: no chain for it.
    expect(byName.has(podChainName('web/client', 'ingress', 'ipv4'))).toBe(false);
    expect(renderNode(model, 'ipv4', NODE_OPTIONS)).toEqual(chains);
  });

  it('fails a pod closed when a policy selecting it could not be programmed', () => {
    const model = smallCluster([serverFromClients]);
    const podChain = podChainName('web/server', 'ingress', 'ipv4');
    const failed = renderNode(model, 'ipv4', NODE_OPTIONS, new Set(['web/server-from-clients']));
    const rules = failed.find((chain) => chain.name === podChain)?.rules ?? [];
    expect(rules.some((rule) => rule.includes('KUBE-NWPLCY-') && !rule.includes(COMMON_CHAIN))).toBe(false);
    expect(rules.at(-1)).toMatch(/-j REJECT$/);
    expect(rules.some((rule) => rule.includes('! --mark'))).toBe(false);
  });

  it('denies pods no policy selects with isolateUnselectedPods', () => {
    const chains = renderNode(smallCluster([]), 'ipv6', { ...NODE_OPTIONS, isolateUnselectedPods: true });
    for (const id of ['web/server', 'web/client']) {
      for (const direction of ['ingress', 'egress'] as const) {
        const rules = chains.find((chain) => chain.name === podChainName(id, direction, 'ipv6'))?.rules ?? [];
        expect(rules.some((rule) => rule.includes('-j REJECT'))).toBe(true);
      }
    }
    expect(renderNode(smallCluster([]), 'ipv6', NODE_OPTIONS).some((chain) => chain.name.startsWith('KUBE-POD-FW-'))).toBe(false);
  });

  it("ends the top-level chains in kube-router's tail with defaultDeny, and leaves pods no policy selects open", () => {
    const options = { ...NODE_OPTIONS, defaultDeny: true, podCidrs: ['10.244.0.0/24', 'fd00:10:244::/64'] };
    const chains = renderNode(smallCluster([]), 'ipv4', options);
    const tail = chains.find((chain) => chain.name === 'KUBE-NWPLCY-TAIL');
    expect(tail?.rules).toEqual([
      expect.stringContaining('-s 10.244.0.0/24 -m set ! --match-set kube-router-local-pods src -m addrtype ! --src-type LOCAL -j REJECT'),
      expect.stringContaining('-d 10.244.0.0/24 -m set ! --match-set kube-router-local-pods dst -m addrtype ! --dst-type LOCAL -j REJECT'),
      expect.stringContaining('-m mark --mark 0x20000/0x20000 -j ACCEPT'),
    ]);
    for (const top of ['KUBE-ROUTER-INPUT', 'KUBE-ROUTER-FORWARD', 'KUBE-ROUTER-OUTPUT']) {
      expect(chains.find((chain) => chain.name === top)?.rules.at(-2)).toMatch(/-j KUBE-NWPLCY-TAIL$/);
    }
    expect(chains.some((chain) => chain.name.startsWith('KUBE-POD-FW-'))).toBe(false);
    expect(renderNode(smallCluster([]), 'ipv4', NODE_OPTIONS).some((chain) => chain.name === 'KUBE-NWPLCY-TAIL')).toBe(false);
    const v6 = renderNode(smallCluster([]), 'ipv6', options).find((chain) => chain.name === 'KUBE-NWPLCY-TAIL');
    expect(v6?.rules[0]).toContain('-s fd00:10:244::/64 -m set ! --match-set inet6:kube-router-local-pods src');
  });
});
