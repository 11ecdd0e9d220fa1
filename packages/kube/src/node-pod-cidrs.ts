import { parseCidr } from './ip-address.js';

/** The parts of a Node that name its pod CIDRs. */
export interface NodePodCidrSource {
  readonly metadata?: { readonly name?: string; readonly annotations?: Readonly<Record<string, string>> };
  readonly spec?: { readonly podCIDR?: string; readonly podCIDRs?: readonly string[] };
}

export const POD_CIDRS_ANNOTATION = 'kube-router.io/pod-cidrs';
export const POD_CIDR_ANNOTATION = 'kube-router.io/pod-cidr';

/**
 * A Node's pod CIDRs as kube-router reads them: the annotation kube-router.io/pod-cidrs (comma separated), else
 * kube-router.io/pod-cidr, else spec.podCIDRs, else spec.podCIDR; canonical (`fd00:1::/64`). One reading for every
 * plugin, so the firewall's local-pod set and the routes BGP advertises never disagree about what is this node's.
 * Throws on a CIDR that does not parse or has host bits set (`10.244.1.5/24` is a typo, not a network), naming the
 * Node and the field it came from.
 */
export function nodePodCidrs(node: NodePodCidrSource | undefined): string[] {
  const annotations = node?.metadata?.annotations ?? {};
  const [source, values] =
    annotations[POD_CIDRS_ANNOTATION] !== undefined
      ? [`annotation ${POD_CIDRS_ANNOTATION}`, annotations[POD_CIDRS_ANNOTATION].split(',')]
      : annotations[POD_CIDR_ANNOTATION] !== undefined
        ? [`annotation ${POD_CIDR_ANNOTATION}`, [annotations[POD_CIDR_ANNOTATION]]]
        : node?.spec?.podCIDRs && node.spec.podCIDRs.length > 0
          ? ['spec.podCIDRs', node.spec.podCIDRs]
          : ['spec.podCIDR', node?.spec?.podCIDR ? [node.spec.podCIDR] : []];
  const where = `node ${node?.metadata?.name ?? '?'}: ${source}`;
  return values
    .map((value) => value.trim())
    .filter((value) => value !== '')
    .map((value) => {
      // Read strictly: ipaddr.js's parseCIDR took 010.244.0.0/24 for 8.244.0.0/24.
      const parsed = parseCidr(value);
      if (parsed === undefined) throw new RangeError(`${where}: not a CIDR: ${JSON.stringify(value)}`);
      if (parsed.network.toString() !== parsed.address.toString()) {
        throw new RangeError(`${where}: ${value} is not a network address (${parsed.cidr})`);
      }
      return parsed.cidr;
    });
}
