import type { V1Node } from '@kubernetes/client-node';
import { isIp, parseIp } from '@kube-router/kube';
import ipaddr from 'ipaddr.js';
import type { Afi } from './gobgp-api.js';
import { canonicalAddress, parseGoUint } from './parse.js';

/** kube-router's Node annotations. */
export const NODE_ASN_ANNOTATION = 'kube-router.io/node.asn';

export type Family = 'ipv4' | 'ipv6';
export const AFI_OF: Record<Family, Afi> = { ipv4: 'AFI_IP', ipv6: 'AFI_IP6' };

/** A Node's addresses as the routing controller uses them. */
export interface NodeAddresses {
  /** The first InternalIP (else ExternalIP): the peering address, as kube-router's GetPrimaryNodeIP. */
  primary: string;
  /** The node's address of each family it has: the next hop of its pod CIDRs of that family. */
  byFamily: Partial<Record<Family, string>>;
}

/**
 * kube-router's check when its routing controller starts (NewKRNode): each family enabled with --enable-ipv4 or
 * --enable-ipv6 must have an InternalIP or ExternalIP on the Node. Returns the problem, or undefined.
 */
export function missingFamilyProblem(addresses: NodeAddresses, enabled: Readonly<Record<Family, boolean>>): string | undefined {
  const missing = (['ipv4', 'ipv6'] as const).filter((family) => enabled[family] && addresses.byFamily[family] === undefined);
  if (missing.length === 0) return undefined;
  return missing.map((family) => `${family === 'ipv4' ? 'IPv4' : 'IPv6'} was enabled (--enable-${family}), but no ${family === 'ipv4' ? 'IPv4' : 'IPv6'} address was found on the node`).join('; ');
}

/**
 * The node's addresses of the families this agent routes (--enable-ipv4, --enable-ipv6), as kube-router's node view
 * holds only those: a family switched off gets no peering family, no announcement and no next hop. Without it an
 * IPv4-only agent on a dual-stack node offered IPv6 unicast to its peers, and with graceful restart gobgpd then held
 * back every route until the deferral time for an IPv6 End-of-RIB that an IPv4-only peer never sends.
 */
export function enabledAddresses(addresses: NodeAddresses, enabled: Readonly<Record<Family, boolean>>): NodeAddresses {
  const byFamily: Partial<Record<Family, string>> = {};
  for (const family of ['ipv4', 'ipv6'] as const) {
    if (enabled[family] && addresses.byFamily[family] !== undefined) byFamily[family] = addresses.byFamily[family];
  }
  const primary = enabled[familyOf(addresses.primary)] ? addresses.primary : (byFamily.ipv4 ?? byFamily.ipv6 ?? addresses.primary);
  return { primary, byFamily };
}

export function familyOf(address: string): Family {
  const parsed = parseIp(address);
  if (parsed === undefined) throw new Error(`${JSON.stringify(address)} is not an IP address`);
  return parsed.family;
}

/**
 * The Node's addresses, InternalIPs before ExternalIPs. Throws when the Node has none or one does not parse: the caller
 * must then not conclude anything about that Node's peer (a transient outage of its address is not a removal).
 */
export function nodeAddresses(node: V1Node): NodeAddresses {
  const addresses = node.status?.addresses ?? [];
  const ordered = [
    ...addresses.filter((a) => a.type === 'InternalIP'),
    ...addresses.filter((a) => a.type === 'ExternalIP'),
  ];
  if (ordered.length === 0) throw new Error(`node ${node.metadata?.name}: no InternalIP or ExternalIP address`);
  const byFamily: Partial<Record<Family, string>> = {};
  const parsed = ordered.map(({ address }) => {
    if (!isIp(address)) throw new Error(`node ${node.metadata?.name}: address ${JSON.stringify(address)} does not parse`);
    const normalized = canonicalAddress(address);
    byFamily[familyOf(normalized)] ??= normalized;
    return normalized;
  });
  return { primary: parsed[0]!, byFamily };
}

/** The ASN a Node announces with kube-router.io/node.asn, undefined without the annotation. Throws when invalid. */
export function nodeAsn(node: V1Node): number | undefined {
  const value = node.metadata?.annotations?.[NODE_ASN_ANNOTATION];
  if (value === undefined) return undefined;
  // strconv.ParseUint(value, 0, 32), as kube-router reads it: 0x10 is 16, 1e3 (or a space) is no ASN.
  const asn = parseGoUint(value, 32);
  if (asn === undefined || asn < 1) {
    throw new Error(`node ${node.metadata?.name}: ${NODE_ASN_ANNOTATION} ${JSON.stringify(value)} is not an ASN`);
  }
  return asn;
}

/**
 * This node's ASN as kube-router's startBgpServer takes it: the cluster ASN in a full mesh (the annotation is not
 * read), otherwise the node's kube-router.io/node.asn, which must then be there. Throws when it cannot start BGP.
 */
export function ownAsn(node: V1Node, fullMesh: boolean, clusterAsn: number): number {
  if (fullMesh) return clusterAsn;
  const asn = nodeAsn(node);
  if (asn === undefined) {
    throw new Error(`node ${node.metadata?.name}: without --nodes-full-mesh, BGP starts only with the node's ASN in ${NODE_ASN_ANNOTATION}`);
  }
  return asn;
}

/** kube-router's --cluster-asn check: a private ASN, 64512-65535 or 4200000000-4294967294. */
export function clusterAsnProblem(asn: number): string | undefined {
  const isPrivate = (asn >= 64_512 && asn <= 65_535) || (asn >= 4_200_000_000 && asn <= 4_294_967_294);
  return isPrivate ? undefined : `invalid ASN number for cluster ASN: ${asn} (a private ASN: 64512-65535 or 4200000000-4294967294)`;
}

/** Why a Node is not in this node's ASN, or undefined when it is. */
function asnMismatch(node: V1Node, localAsn: number): string | undefined {
  let asn: number | undefined;
  try {
    asn = nodeAsn(node);
  } catch (error) {
    return (error as Error).message;
  }
  if (asn === undefined) return `no ${NODE_ASN_ANNOTATION}`;
  return asn === localAsn ? undefined : `ASN ${asn} differs from ${localAsn}`;
}

export interface DesiredPeer {
  node: string;
  address: string;
  asn: number;
  families: Afi[];
}

export interface PeerPlan {
  peers: DesiredPeer[];
  /** Nodes whose addresses or annotations could not be read; while any exists, no peer is deleted. */
  problems: { node: string; error: Error }[];
  /** Nodes deliberately left out, with why (different ASN, other family). */
  skipped: { node: string; reason: string }[];
}

export interface PeerPlanInput {
  selfName: string;
  self: NodeAddresses;
  /** This node's own ASN (ownAsn). */
  localAsn: number;
  /** --nodes-full-mesh: peer with every Node; otherwise only with Nodes that announce the same ASN. */
  fullMesh: boolean;
  nodes: readonly V1Node[];
}

/**
 * The iBGP mesh as kube-router builds it: every other Node, on its primary address, in this node's ASN, carrying
 * the unicast families that Node has addresses in. A Node whose primary address is of the other family is skipped.
 */
export function planInternalPeers(input: PeerPlanInput): PeerPlan {
  const plan: PeerPlan = { peers: [], problems: [], skipped: [] };
  const selfFamily = familyOf(input.self.primary);
  for (const node of input.nodes) {
    const name = node.metadata?.name ?? '';
    if (name === input.selfName) continue;
    let addresses: NodeAddresses;
    try {
      addresses = nodeAddresses(node);
    } catch (error) {
      plan.problems.push({ node: name, error: error instanceof Error ? error : new Error(String(error)) });
      continue;
    }
    if (addresses.primary === input.self.primary) continue;
    // A full mesh reads no Node's ASN; otherwise a Node is a peer only when its ASN parses and is ours. Missing or
    // unreadable, it is left out, as kube-router leaves it out: not a problem that holds back peer removal.
    const asnSkip = input.fullMesh ? undefined : asnMismatch(node, input.localAsn);
    if (asnSkip !== undefined) {
      plan.skipped.push({ node: name, reason: asnSkip });
      continue;
    }
    if (familyOf(addresses.primary) !== selfFamily) {
      plan.skipped.push({ node: name, reason: `primary address ${addresses.primary} is not ${selfFamily}` });
      continue;
    }
    const families = (Object.keys(addresses.byFamily) as Family[]).filter((f) => input.self.byFamily[f]).map((f) => AFI_OF[f]);
    plan.peers.push({ node: name, address: addresses.primary, asn: input.localAsn, families });
  }
  return plan;
}

/** Whether `address` lies in one of the on-link prefixes (`10.0.0.1/24`) of this node. */
export function onLinkPrefixContains(prefixes: readonly string[], address: string): boolean {
  const parsed = parseIp(address)?.address;
  if (parsed === undefined) return false;
  return prefixes.some((prefix) => {
    const [network, length] = ipaddr.parseCIDR(prefix);
    return network.kind() === parsed.kind() && parsed.match(network, length);
  });
}

/**
 * kube-router's --router-id=generate: FNV-1a (32 bits) of the node's primary address as Go holds it, 16 bytes, an
 * IPv4 address in its IPv4-mapped form (net.ParseIP), so that a node keeps the id kube-router gave it.
 */
export function generatedRouterId(address: string): string {
  const parsed = parseIp(address)?.address;
  const bytes = parsed === undefined ? [] : parsed.kind() === 'ipv4' ? (parsed as ipaddr.IPv4).toIPv4MappedAddress().toByteArray() : parsed.toByteArray();
  let hash = 0x811c9dc5;
  for (const byte of bytes) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return [24, 16, 8, 0].map((shift) => (hash >>> shift) & 0xff).join('.');
}
