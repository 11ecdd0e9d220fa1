import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  generatedRouterId,
  nodeAddresses,
  nodeAsn,
  onLinkPrefixContains,
  planInternalPeers,
  NODE_ASN_ANNOTATION,
  ownAsn,
  clusterAsnProblem,
  enabledAddresses,
  missingFamilyProblem,
} from './nodes.js';
import { nodePodCidrs, POD_CIDR_ANNOTATION, POD_CIDRS_ANNOTATION } from '@kube-router/kube';
import { learnedBestPaths, pathNextHop, pathPrefix, podCidrPath } from './paths.js';

function node(name: string, addresses: [string, string][], extra: { annotations?: Record<string, string>; podCIDRs?: string[] } = {}): V1Node {
  return {
    metadata: { name, ...(extra.annotations && { annotations: extra.annotations }) },
    spec: { ...(extra.podCIDRs && { podCIDRs: extra.podCIDRs, podCIDR: extra.podCIDRs[0] }) },
    status: { addresses: addresses.map(([type, address]) => ({ type, address })) },
  };
}

describe('node addresses', () => {
  it('takes InternalIPs before ExternalIPs, one per family, normalized', () => {
    const n = node('a', [['ExternalIP', '192.0.2.1'], ['InternalIP', '10.0.0.1'], ['InternalIP', 'fd00:0::1'], ['Hostname', 'a']]);
    expect(nodeAddresses(n)).toEqual({ primary: '10.0.0.1', byFamily: { ipv4: '10.0.0.1', ipv6: 'fd00::1' } });
  });

  it('refuses a Node without addresses or with one that does not parse', () => {
    expect(() => nodeAddresses(node('a', []))).toThrow(/no InternalIP/);
    expect(() => nodeAddresses(node('a', [['InternalIP', '10.0.0.x']]))).toThrow(/does not parse/);
  });
});

describe('pod CIDRs', () => {
  it('prefers kube-router.io/pod-cidrs, then kube-router.io/pod-cidr, then spec.podCIDRs', () => {
    const spec = { podCIDRs: ['10.244.1.0/24'] };
    expect(nodePodCidrs(node('a', [], spec))).toEqual(['10.244.1.0/24']);
    expect(nodePodCidrs(node('a', [], { ...spec, annotations: { [POD_CIDR_ANNOTATION]: '10.9.0.0/24' } }))).toEqual(['10.9.0.0/24']);
    expect(
      nodePodCidrs(node('a', [], { ...spec, annotations: { [POD_CIDR_ANNOTATION]: '10.9.0.0/24', [POD_CIDRS_ANNOTATION]: '10.8.0.0/24, fd00:8::/64' } })),
    ).toEqual(['10.8.0.0/24', 'fd00:8::/64']);
  });

  it('refuses a CIDR that does not parse or has host bits', () => {
    expect(() => nodePodCidrs(node('a', [], { podCIDRs: ['10.244.1.0/33'] }))).toThrow(/not a CIDR/);
    expect(() => nodePodCidrs(node('a', [], { podCIDRs: ['10.244.1.5/24'] }))).toThrow(/not a network address/);
  });
});

describe('ASN annotation', () => {
  it('reads kube-router.io/node.asn and refuses junk', () => {
    expect(nodeAsn(node('a', []))).toBeUndefined();
    expect(nodeAsn(node('a', [], { annotations: { [NODE_ASN_ANNOTATION]: '65001' } }))).toBe(65001);
    expect(() => nodeAsn(node('a', [], { annotations: { [NODE_ASN_ANNOTATION]: 'x' } }))).toThrow(/not an ASN/);
    // strconv.ParseUint(value, 0, 32) as kube-router: hex is a number, an exponent or a fraction is not.
    expect(nodeAsn(node('a', [], { annotations: { [NODE_ASN_ANNOTATION]: '0x10' } }))).toBe(16);
    for (const junk of ['1e3', '1.0', '0', '4294967296', '0x']) {
      expect(() => nodeAsn(node('a', [], { annotations: { [NODE_ASN_ANNOTATION]: junk } })), junk).toThrow(/not an ASN/);
    }
  });

  it('refuses an address Go would not parse (ipaddr.js alone takes 10.1)', () => {
    expect(() => nodeAddresses(node('a', [['InternalIP', '10.1']]))).toThrow(/does not parse/);
  });
});

describe('internal peer plan', () => {
  const self = { primary: '10.0.0.1', byFamily: { ipv4: '10.0.0.1', ipv6: 'fd00::1' } } as const;
  const nodes = [
    node('self', [['InternalIP', '10.0.0.1']]),
    node('b', [['InternalIP', '10.0.0.2'], ['InternalIP', 'fd00::2']]),
    node('c', [['InternalIP', '10.0.0.3']], { annotations: { [NODE_ASN_ANNOTATION]: '65001' } }),
    node('junk-asn', [['InternalIP', '10.0.0.5']], { annotations: { [NODE_ASN_ANNOTATION]: 'sixty-five' } }),
    node('v6', [['InternalIP', 'fd00::4']]),
    node('broken', [['InternalIP', 'nope']]),
  ];

  it('full mesh: every other Node of the same primary family, in our ASN, with the families both have; no ASN is read', () => {
    const plan = planInternalPeers({ selfName: 'self', self, localAsn: 64512, fullMesh: true, nodes });
    expect(plan.peers).toEqual([
      { node: 'b', address: '10.0.0.2', asn: 64512, families: ['AFI_IP', 'AFI_IP6'] },
      { node: 'c', address: '10.0.0.3', asn: 64512, families: ['AFI_IP'] },
      { node: 'junk-asn', address: '10.0.0.5', asn: 64512, families: ['AFI_IP'] },
    ]);
    expect(plan.problems.map((p) => p.node)).toEqual(['broken']);
    expect(plan.skipped.map((s) => s.node)).toEqual(['v6']);
  });

  it('without full mesh: only Nodes that announce our ASN', () => {
    const plan = planInternalPeers({ selfName: 'self', self, localAsn: 65001, fullMesh: false, nodes });
    expect(plan.peers.map((p) => p.node)).toEqual(['c']);
    // As kube-router: a Node whose ASN is missing or does not parse is left out, not a problem holding back removals.
    expect(plan.problems.map((p) => p.node)).toEqual(['broken']);
    expect(plan.skipped).toContainEqual({ node: 'junk-asn', reason: expect.stringContaining('"sixty-five" is not an ASN') });
    expect(plan.skipped).toContainEqual({ node: 'b', reason: 'no kube-router.io/node.asn' });
  });

  it("takes this node's ASN as kube-router's startBgpServer: the cluster ASN in a full mesh, else the annotation, required", () => {
    const annotated = node('self', [], { annotations: { [NODE_ASN_ANNOTATION]: '65001' } });
    expect(ownAsn(annotated, true, 64512)).toBe(64512);
    expect(ownAsn(annotated, false, 64512)).toBe(65001);
    expect(() => ownAsn(node('self', []), false, 64512)).toThrow('without --nodes-full-mesh, BGP starts only with the node\'s ASN in kube-router.io/node.asn');
    expect(() => ownAsn(node('self', [], { annotations: { [NODE_ASN_ANNOTATION]: ' 65001' } }), false, 64512)).toThrow(/not an ASN/);
  });

  it('enabledAddresses keeps the families the agent routes, and a primary address of one of them', () => {
    const dual = { primary: 'fd00::1', byFamily: { ipv4: '10.0.0.1', ipv6: 'fd00::1' } };
    expect(enabledAddresses(dual, { ipv4: true, ipv6: false })).toEqual({ primary: '10.0.0.1', byFamily: { ipv4: '10.0.0.1' } });
    expect(enabledAddresses(dual, { ipv4: true, ipv6: true })).toEqual(dual);
    expect(enabledAddresses(dual, { ipv4: false, ipv6: true })).toEqual({ primary: 'fd00::1', byFamily: { ipv6: 'fd00::1' } });
  });

  it('names each family enabled by flag that the node has no address of', () => {
    const v4 = { primary: '10.0.0.1', byFamily: { ipv4: '10.0.0.1' } };
    expect(missingFamilyProblem(v4, { ipv4: true, ipv6: false })).toBeUndefined();
    expect(missingFamilyProblem(v4, { ipv4: true, ipv6: true })).toBe('IPv6 was enabled (--enable-ipv6), but no IPv6 address was found on the node');
    expect(missingFamilyProblem({ primary: 'fd00::1', byFamily: { ipv6: 'fd00::1' } }, { ipv4: true, ipv6: true })).toContain('IPv4 was enabled (--enable-ipv4)');
  });

  it("refuses a --cluster-asn outside kube-router's private ranges", () => {
    for (const asn of [64512, 65535, 4_200_000_000, 4_294_967_294]) expect(clusterAsnProblem(asn), String(asn)).toBeUndefined();
    for (const asn of [1, 64511, 65536, 4_199_999_999, 4_294_967_295]) expect(clusterAsnProblem(asn), String(asn)).toContain('invalid ASN number for cluster ASN');
  });
});

describe('helpers', () => {
  it('tells on-link next hops', () => {
    expect(onLinkPrefixContains(['10.0.0.1/24', 'fd00::1/64'], '10.0.0.9')).toBe(true);
    expect(onLinkPrefixContains(['10.0.0.1/24', 'fd00::1/64'], '10.0.1.9')).toBe(false);
    expect(onLinkPrefixContains(['10.0.0.1/24', 'fd00::1/64'], 'fd00::9')).toBe(true);
  });

  it('generates a stable router id', () => {
    expect(generatedRouterId('fd00::1')).toBe(generatedRouterId('fd00:0::1'));
    expect(generatedRouterId('fd00::1')).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(generatedRouterId('fd00::1')).not.toBe(generatedRouterId('fd00::2'));
  });

  it("generates kube-router's router id on an IPv4 node: FNV-1a of the 16-byte IPv4-mapped address Go holds", () => {
    // kube-router's bgp.GenerateRouterID hashes net.ParseIP("10.0.0.1"), ::ffff:10.0.0.1; hashing 4 bytes gave
    // 108.80.106.44, so a node swapped from kube-router came back to its peers under another id.
    expect(generatedRouterId('10.0.0.1')).toBe('0.15.248.254');
    expect(generatedRouterId('10.0.0.1')).toBe(generatedRouterId('::ffff:10.0.0.1'));
  });

  it('builds pod CIDR paths per family and reads learned ones back', () => {
    const v4 = podCidrPath('10.244.1.0/24', '10.0.0.1');
    const v6 = podCidrPath('fd00:244:1::/64', 'fd00::1');
    expect(v4.family).toEqual({ afi: 'AFI_IP', safi: 'SAFI_UNICAST' });
    expect(v6.family).toEqual({ afi: 'AFI_IP6', safi: 'SAFI_UNICAST' });
    expect([pathPrefix(v4), pathNextHop(v4)]).toEqual(['10.244.1.0/24', '10.0.0.1']);
    expect([pathPrefix(v6), pathNextHop(v6)]).toEqual(['fd00:244:1::/64', 'fd00::1']);
    const learned = learnedBestPaths([
      { ...v4, best: true, neighborIp: '10.0.0.2' },
      { ...v6, best: true, neighborIp: '<nil>' },
      { ...podCidrPath('10.244.2.0/24', '10.0.0.3'), best: false, neighborIp: '10.0.0.3' },
    ]);
    expect(learned).toEqual([{ destination: '10.244.1.0/24', nextHop: '10.0.0.1', neighbor: '10.0.0.2' }]);
  });
});

describe('gobgp API target', () => {
  it('is the admin address and port, a Unix socket when given, and the default socket for port 0', async () => {
    const { gobgpApiTarget, routingBgpOptions, DEFAULT_GOBGP_API_SOCKET } = await import('./plugin.js');
    expect(gobgpApiTarget(routingBgpOptions.parse({}))).toBe('127.0.0.1:50051');
    expect(gobgpApiTarget(routingBgpOptions.parse({ gobgpAdminAddress: '::1', gobgpAdminPort: 5 }))).toBe('[::1]:5');
    expect(gobgpApiTarget(routingBgpOptions.parse({ gobgpAdminPort: 0 }))).toBe(`unix://${DEFAULT_GOBGP_API_SOCKET}`);
    expect(gobgpApiTarget(routingBgpOptions.parse({ gobgpApiSocket: '/tmp/x.sock' }))).toBe('unix:///tmp/x.sock');
    expect(() => routingBgpOptions.parse({ routerId: '10.0.0.300' })).toThrow();
  });
});
