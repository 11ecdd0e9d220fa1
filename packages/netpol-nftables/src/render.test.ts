import { describe, expect, it } from 'vitest';
import { EGRESS_MAP, INGRESS_MAP, LOCAL_PODS_SET, TOP_CHAINS, isOwnChain, sharedAddressChainName } from './names.js';
import { COMMON_CHAIN, TAIL_CHAIN, podChainName, policyChainName } from '@kube-router/netpol';
import { chainBlock } from './objects.js';
import { renderNode } from './render-node.js';
import type { NodeRenderOptions } from './render-node.js';
import { renderPolicy } from './render-policy.js';
import { compileNetworkPolicies } from '@kube-router/netpol';
import type { NetworkPolicyLike } from '@kube-router/netpol';
import { fixturePod as pod, fixturePolicy as policy, smallClusterInput } from '@kube-router/testkit/netpol-conformance';
import type { FixturePod } from '@kube-router/testkit/netpol-conformance';

const smallCluster = (policies: readonly NetworkPolicyLike[], extraPods: readonly FixturePod[] = []) =>
  compileNetworkPolicies(smallClusterInput(policies, extraPods));

const NODE_OPTIONS: NodeRenderOptions = {
  defaultDeny: false,
  podCidrs: [],
  isolateUnselectedPods: false,
  serviceClusterIpRanges: ['10.96.0.0/12', 'fd00:96::/108'],
  serviceExternalIpRanges: ['192.0.2.0/24'],
  serviceLoadBalancerIpRanges: ['198.51.100.0/24'],
  nodePortRange: '30000-32767',
};

const serverFromClients = policy('web/server-from-clients', {
  podSelector: { matchLabels: { app: 'server' } },
  ingress: [
    {
      from: [
        { namespaceSelector: {}, podSelector: { matchLabels: { app: 'client' } } },
        { ipBlock: { cidr: '192.168.0.0/16', except: ['192.168.1.0/24'] } },
      ],
      ports: [{ port: 'http' }, { port: 9000, endPort: 9010, protocol: 'UDP' }, { protocol: 'SCTP' }],
    },
  ],
});

describe('renderPolicy', () => {
  const model = smallCluster([serverFromClients]);
  const compiled = model.policies[0];
  if (!compiled) throw new Error('no policy');
  const rendered = renderPolicy(compiled, ['ipv4', 'ipv6']);

  it('renders typed sets: peer pods and an interval set of the ipBlocks', () => {
    const v4 = rendered.families.ipv4;
    expect(v4?.sets.map((set) => [set.type, set.kind, set.elements])).toEqual([
      ['ipv4_addr', 'hash', ['10.0.0.3', '10.0.1.3']],
      ['ipv4_addr . inet_proto', 'interval', ['192.168.0.0-192.168.0.255 . 0-255', '192.168.2.0-192.168.255.255 . 0-255']],
    ]);
    // The ipBlocks are IPv4 only: IPv6 gets the pods, never "any".
    expect(rendered.families.ipv6?.sets.map((set) => set.type)).toEqual(['ipv6_addr']);
  });

  it('names peer sets by their selectors and ipBlock sets by their ranges, so that policies alike share them', () => {
    const sameSelection = policy('web/also-from-clients', {
      podSelector: {},
      ingress: [
        { from: [{ ipBlock: { cidr: '192.168.0.0/16', except: ['192.168.1.0/24'] } }, { namespaceSelector: {}, podSelector: { matchLabels: { app: 'client' } } }] },
      ],
      egress: [{ to: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: 'client' } } }] }],
    });
    const otherNamespace = policy('other/from-clients', {
      podSelector: {},
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }, { ipBlock: { cidr: '192.168.0.0/17' } }] }],
    });
    const both = smallCluster([serverFromClients, sameSelection, otherNamespace], [pod('other/local', ['10.0.1.7'], { app: 'x' })]);
    const names = (id: string, family: 'ipv4' | 'ipv6' = 'ipv4') => {
      const found = both.policies.find((candidate) => candidate.id === id);
      if (!found) throw new Error(`no ${id}`);
      return renderPolicy(found, ['ipv4', 'ipv6']).families[family]?.sets.map((set) => set.name) ?? [];
    };
    const [pods, blocks] = names('web/server-from-clients');
    // The same selectors and the same ipBlocks in another policy and another rule order: the same two sets.
    expect(names('web/also-from-clients').slice(0, 2).sort()).toEqual([pods, blocks].sort());
    // Egress keeps its own (destination) sets; another namespace's podSelector and other ranges are other sets.
    expect(names('web/also-from-clients')[2]).toMatch(/^KUBE-DST-/);
    expect(names('other/from-clients')).not.toContain(pods);
    expect(names('other/from-clients')).not.toContain(blocks);
    expect(names('web/server-from-clients', 'ipv6')[0]).not.toBe(pods);
  });

  it('matches one port, one protocol and one named-port destination without a set, each peer set once per port match', () => {
    const chain = rendered.families.ipv4?.chains[0];
    expect(chain?.name).toBe(policyChainName('web/server-from-clients', 'ingress', 'ipv4'));
    const texts = chain?.rules.map((rule) => rule.text) ?? [];
    expect(texts).toHaveLength(6);
    expect(texts[0]).toMatch(/^ip saddr @KUBE-SRC-[0-9A-F]{16} meta l4proto udp th dport 9000-9010 counter meta mark set meta mark \| 0x10000 return$/);
    expect(texts[1]).toMatch(/ meta l4proto sctp /);
    expect(texts[2]).toMatch(/ ip daddr 10\.0\.0\.2 meta l4proto tcp th dport 8080 /);
  });

  it('matches several ports in one concatenated set and several named-port destinations in a typed set', () => {
    const twoServers = smallCluster(
      [policy('web/both', { podSelector: {}, ingress: [{ ports: [{ port: 'http' }, { port: 80 }, { port: 53, protocol: 'UDP' }, { protocol: 'SCTP' }, { protocol: 'UDP' }] }] })],
      [pod('web/other-server', ['10.0.0.4', 'fd00::4'], { app: 'server' }, { ports: [{ name: 'http', port: 8081 }] })],
    );
    const v4 = renderPolicy(twoServers.policies[0] as never, ['ipv4']).families.ipv4;
    const texts = v4?.chains[0]?.rules.map((rule) => rule.text) ?? [];
    expect(texts[0]).toMatch(/^meta l4proto \. th dport \{ tcp \. 80, udp \. 53 \} /);
    expect(texts[1]).toMatch(/^meta l4proto \{ udp, sctp \} /);
    expect(texts[2]).toMatch(/^ip daddr \. meta l4proto \. th dport @KUBE-DST-[0-9A-F]{16} /);
    expect(v4?.sets.map((set) => [set.type, set.elements])).toEqual([
      ['ipv4_addr . inet_proto . inet_service', ['10.0.0.2 . tcp . 8080', '10.0.0.4 . tcp . 8081']],
    ]);
  });

  it('merges overlapping port ranges of a protocol, which the kernel refuses in one interval set', () => {
    const ports = [{ port: 8000, endPort: 9000 }, { port: 8080 }, { port: 8500, endPort: 9500 }, { port: 10000 }, { port: 53, protocol: 'UDP' }];
    const overlapping = renderPolicy(smallCluster([policy('web/ports', { podSelector: {}, ingress: [{ ports }] })]).policies[0] as never, ['ipv4']);
    expect(overlapping.families.ipv4?.chains[0]?.rules.map((rule) => rule.text)).toEqual([
      expect.stringMatching(/^meta l4proto \. th dport \{ tcp \. 8000-9500, tcp \. 10000, udp \. 53 \} /),
    ]);
    // Contained in one range, one range is left: matched without a set.
    const contained = renderPolicy(smallCluster([policy('web/one', { podSelector: {}, ingress: [{ ports: [{ port: 80 }, { port: 70, endPort: 90 }] }] })]).policies[0] as never, ['ipv4']);
    expect(contained.families.ipv4?.chains[0]?.rules.map((rule) => rule.text)).toEqual([expect.stringMatching(/^meta l4proto tcp th dport 70-90 /)]);
  });

  it('renders identically twice (names and digests are stable)', () => {
    // Family by family: a render's families are getters, which a deep comparison of the render would not see.
    const again = renderPolicy(compiled, ['ipv4', 'ipv6']);
    expect(again.families.ipv4).toEqual(rendered.families.ipv4);
    expect(again.families.ipv6).toEqual(rendered.families.ipv6);
    expect(again.families.ipv4?.chains.length).toBeGreaterThan(0);
  });

  it('renders no family that is not enabled or that none of its targets has an address of', () => {
    expect(renderPolicy(compiled, ['ipv6']).families.ipv4).toBeUndefined();
    expect(renderPolicy(compiled, ['ipv6']).families.ipv6).toEqual(rendered.families.ipv6);
    const v4Only = { ...compiled, targetIPs: { ipv4: compiled.targetIPs.ipv4, ipv6: [] } };
    expect(renderPolicy(v4Only, ['ipv4', 'ipv6']).families.ipv6).toBeUndefined();
    expect(renderPolicy(v4Only, ['ipv4', 'ipv6']).families.ipv4).toEqual(rendered.families.ipv4);
  });

  it('sends a rule that allows everything to the default chain, and gives a deny-all an empty chain', () => {
    const allowAll = renderPolicy(smallCluster([policy('web/all', { podSelector: {}, ingress: [{}] })]).policies[0] as never, ['ipv4']);
    expect(allowAll.families.ipv4?.chains[0]?.rules.map((rule) => rule.text)).toEqual(['counter goto KUBE-NWPLCY-DEFAULT']);
    const denyAll = renderPolicy(smallCluster([policy('web/none', { podSelector: {} })]).policies[0] as never, ['ipv4']);
    expect(denyAll.families.ipv4?.chains[0]?.rules).toEqual([]);
  });
});

describe('renderNode', () => {
  it('dispatches pods through verdict maps, so the base chains do not grow with pods', () => {
    const small = renderNode(smallCluster([policy('web/none', { podSelector: {} })]), 'ipv4', NODE_OPTIONS);
    const none = renderNode(smallCluster([]), 'ipv4', NODE_OPTIONS);
    expect(small.baseChains.map((c) => c.rules.length)).toEqual(none.baseChains.map((c) => c.rules.length));
    const ingress = small.sets.find((set) => set.name === INGRESS_MAP);
    expect(ingress?.elements).toEqual([
      `10.0.0.2 : jump ${podChainName('web/server', 'ingress', 'ipv4')}`,
      `10.0.0.3 : jump ${podChainName('web/client', 'ingress', 'ipv4')}`,
    ]);
    expect(small.sets.find((set) => set.name === EGRESS_MAP)?.elements).toEqual([]);
    expect(small.baseChains.map((c) => [c.name, c.hook])).toEqual([
      [TOP_CHAINS.input, 'input'],
      [TOP_CHAINS.forward, 'forward'],
      [TOP_CHAINS.output, 'output'],
    ]);
    const input = small.baseChains[0]?.rules.map((rule) => rule.text);
    expect(input).toEqual([
      'ip daddr { 10.96.0.0/12, 192.0.2.0/24, 198.51.100.0/24 } return',
      'meta l4proto { tcp, udp, sctp } fib daddr type local th dport 30000-32767 return',
      `ip saddr vmap @${EGRESS_MAP}`,
      `jump ${TAIL_CHAIN}`,
    ]);
  });

  it('sends an address two local pods hold through both pods\' chains, in turn: a map takes one verdict per address', () => {
    // web/stale: a pod object left with web/server's address.
    const node = renderNode(smallCluster([policy('web/none', { podSelector: {} })], [pod('web/stale', ['10.0.0.2'])]), 'ipv4', NODE_OPTIONS);
    const ingress = node.sets.find((set) => set.name === INGRESS_MAP)?.elements ?? [];
    const shared = sharedAddressChainName('10.0.0.2', 'ingress', 'ipv4');
    expect(ingress.filter((element) => element.startsWith('10.0.0.2 '))).toEqual([`10.0.0.2 : jump ${shared}`]);
    const chains = node.podChains.map((c) => c.name);
    const sharedChain = node.podChains.find((c) => c.name === shared);
    expect(sharedChain?.rules.map((rule) => rule.text)).toEqual([
      `jump ${podChainName('web/server', 'ingress', 'ipv4')}`,
      `jump ${podChainName('web/stale', 'ingress', 'ipv4')}`,
    ]);
    // After the chains it jumps to, in the transaction that writes them.
    expect(chains.indexOf(shared)).toBeGreaterThan(chains.indexOf(podChainName('web/stale', 'ingress', 'ipv4')));
    expect(isOwnChain(shared)).toBe(true);
    // The address the other pod alone holds keeps its own chain.
    expect(ingress).toContain(`10.0.0.3 : jump ${podChainName('web/client', 'ingress', 'ipv4')}`);
  });

  it('logs to NFLOG group 100, rate-limited, then rejects in a pod chain', () => {
    const node = renderNode(smallCluster([policy('web/none', { podSelector: {} })]), 'ipv4', NODE_OPTIONS);
    const rules = node.podChains[0]?.rules.map((rule) => rule.text) ?? [];
    expect(rules[0]).toBe(`jump ${COMMON_CHAIN}`);
    expect(rules).toContain('meta mark & 0x10000 == 0 limit rate 10/minute burst 10 packets log group 100');
    expect(rules).toContain('meta mark & 0x10000 == 0 counter reject');
    expect(rules.at(-1)).toBe('meta mark set meta mark | 0x20000');
  });

  it('fails the targets of a refused policy closed', () => {
    const model = smallCluster([policy('web/all', { podSelector: { matchLabels: { app: 'server' } }, ingress: [{}] })]);
    const rules = renderNode(model, 'ipv4', NODE_OPTIONS, new Set(['web/all'])).podChains[0]?.rules.map((rule) => rule.text);
    expect(rules).toEqual([`jump ${COMMON_CHAIN}`, 'limit rate 10/minute burst 10 packets log group 100', 'counter reject']);
  });

  it("with default deny rejects unprogrammed addresses of the pod CIDRs in the tail, leaving pods no policy selects open", () => {
    const node = renderNode(smallCluster([]), 'ipv6', { ...NODE_OPTIONS, defaultDeny: true, podCidrs: ['10.0.0.0/24', 'fd00::/64'] });
    expect(node.podChains).toEqual([]);
    expect(node.sets.find((set) => set.name === LOCAL_PODS_SET)?.elements).toEqual(['fd00::2', 'fd00::3']);
    expect(node.sharedChains.find((c) => c.name === TAIL_CHAIN)?.rules.map((rule) => rule.text)).toEqual([
      `ip6 saddr fd00::/64 ip6 saddr != @${LOCAL_PODS_SET} fib saddr type != local counter reject`,
      `ip6 daddr fd00::/64 ip6 daddr != @${LOCAL_PODS_SET} fib daddr type != local counter reject`,
      'meta mark & 0x20000 == 0x20000 accept',
    ]);
    expect(renderNode(smallCluster([]), 'ipv6', NODE_OPTIONS).sharedChains.find((c) => c.name === TAIL_CHAIN)?.rules).toHaveLength(1);
  });

  it('isolates pods no policy selects only with isolateUnselectedPods', () => {
    expect(renderNode(smallCluster([]), 'ipv4', { ...NODE_OPTIONS, isolateUnselectedPods: true }).podChains).toHaveLength(4);
  });
});

describe('chainBlock', () => {
  it('declares a base chain with its hook and tags its first rule with the digest', () => {
    const node = renderNode(smallCluster([]), 'ipv4', NODE_OPTIONS);
    const forward = node.baseChains[1];
    if (!forward) throw new Error('no forward chain');
    const lines = chainBlock(forward);
    expect(lines[0]).toBe('chain KUBE-ROUTER-FORWARD {');
    expect(lines[1]).toBe('type filter hook forward priority filter; policy accept;');
    expect(lines[2]).toContain(`[rev ${forward.digest}]`);
    expect(lines.at(-1)).toBe('}');
    expect(lines).toHaveLength(forward.rules.length + 3);
  });
});
