import { anyType, type Afi, type AnyMessage, type ApiPath } from './gobgp-api.js';
import { AFI_OF, familyOf } from './nodes.js';

/** BGP ORIGIN IGP, as kube-router announces its pod CIDRs. */
const ORIGIN_IGP = 0;

/** The gobgp path that announces `cidr` (canonical) with `nextHop`: NEXT_HOP for IPv4, MP_REACH_NLRI for IPv6. */
export function podCidrPath(cidr: string, nextHop: string): ApiPath {
  const [prefix, length] = cidr.split('/') as [string, string];
  const afi = AFI_OF[familyOf(prefix)];
  const family = { afi, safi: 'SAFI_UNICAST' };
  const nlri: AnyMessage = { '@type': anyType('IPAddressPrefix'), prefix, prefixLen: Number(length) };
  const origin: AnyMessage = { '@type': anyType('OriginAttribute'), origin: ORIGIN_IGP };
  const hop: AnyMessage =
    afi === 'AFI_IP'
      ? { '@type': anyType('NextHopAttribute'), nextHop }
      : { '@type': anyType('MpReachNLRIAttribute'), family, nextHops: [nextHop], nlris: [nlri] };
  return { family, nlri, pattrs: [origin, hop] };
}

/** The canonical prefix of a path's NLRI, undefined for anything but an IP unicast prefix. */
export function pathPrefix(path: ApiPath): string | undefined {
  const nlri = path.nlri;
  if (!nlri || nlri['@type'] !== anyType('IPAddressPrefix')) return undefined;
  return `${String(nlri.prefix)}/${Number(nlri.prefixLen)}`;
}

/** The next hop a path carries (NEXT_HOP, else the first of MP_REACH_NLRI's). */
export function pathNextHop(path: ApiPath): string | undefined {
  for (const attribute of path.pattrs ?? []) {
    if (attribute['@type'] === anyType('NextHopAttribute') && typeof attribute.nextHop === 'string') return attribute.nextHop;
    if (attribute['@type'] === anyType('MpReachNLRIAttribute')) {
      const hops = attribute.nextHops;
      if (Array.isArray(hops) && typeof hops[0] === 'string') return hops[0];
    }
  }
  return undefined;
}

/** Whether this speaker originated the path (gobgp reports no neighbor for it). */
export function isLocalPath(path: ApiPath): boolean {
  return !path.neighborIp || path.neighborIp === '<nil>';
}

export function isUnicast(path: ApiPath, afi: Afi): boolean {
  return path.family?.afi === afi && path.family.safi === 'SAFI_UNICAST';
}

export interface LearnedPath {
  destination: string;
  nextHop: string;
  neighbor: string;
}

/** The best paths that peers sent us, one per destination. */
export function learnedBestPaths(paths: readonly ApiPath[]): LearnedPath[] {
  const learned = new Map<string, LearnedPath>();
  for (const path of paths) {
    if (!path.best || path.isWithdraw || isLocalPath(path)) continue;
    const destination = pathPrefix(path);
    const nextHop = pathNextHop(path);
    if (!destination || !nextHop) continue;
    learned.set(destination, { destination, nextHop, neighbor: path.neighborIp! });
  }
  return [...learned.values()];
}
