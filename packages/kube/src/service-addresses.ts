import ipaddr from 'ipaddr.js';
import { inCidrs, parseCidrs } from './cidrs.js';

/** The ranges of kube-router's --strict-external-ip-validation: its --service-external-ip-range, --loadbalancer-ip-range and --service-cluster-ip-range. */
export interface ServiceAddressRanges {
  readonly externalIpRanges: readonly string[];
  readonly loadBalancerIpRanges: readonly string[];
  readonly clusterIpRanges: readonly string[];
}

/** The kinds of Service address that strict validation checks (cluster IPs are the API server's to allocate). */
export type ValidatedAddressKind = 'externalip' | 'loadbalancerip';

/**
 * kube-router's --strict-external-ip-validation (its svcip validator, since 2.8): an externalIP must lie in
 * --service-external-ip-range and a LoadBalancer ingress IP in --loadbalancer-ip-range, and neither in
 * --service-cluster-ip-range; with no range of a kind, every address of that kind is refused (default deny), so that
 * whoever may write a Service cannot take over traffic to an address the operator did not hand out. The validator
 * says why an address is refused, or undefined when it may be used. Ranges that do not parse are left out (the agent
 * checks its flags at start); an address that does not parse is refused.
 */
export function serviceAddressValidator(ranges: ServiceAddressRanges): (kind: ValidatedAddressKind, address: string) => string | undefined {
  const parsed = {
    externalip: parseValid(ranges.externalIpRanges),
    loadbalancerip: parseValid(ranges.loadBalancerIpRanges),
    cluster: parseValid(ranges.clusterIpRanges),
  };
  return (kind, address) => {
    const flag = kind === 'externalip' ? '--service-external-ip-range' : '--loadbalancer-ip-range';
    if (!ipaddr.isValid(address)) return 'it is not an IP address';
    if (parsed[kind].length === 0) return `no ${flag} is configured (strict validation denies every ${kind})`;
    if (inCidrs(address, parsed.cluster)) return 'it lies in --service-cluster-ip-range';
    if (!inCidrs(address, parsed[kind])) return `it is not within ${flag}`;
    return undefined;
  };
}

function parseValid(cidrs: readonly string[]) {
  return parseCidrs(cidrs.filter((cidr) => ipaddr.isValidCIDR(cidr)));
}
