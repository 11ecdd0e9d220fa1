import { z } from 'zod';
import { inCidrs, parseCidrs } from './cidrs.js';
import { isIp, parseCidr } from './ip-address.js';

/** The ranges of kube-router's --strict-external-ip-validation: its --service-external-ip-range, --loadbalancer-ip-range and --service-cluster-ip-range. */
export interface ServiceAddressRanges {
  readonly externalIpRanges: readonly string[];
  readonly loadBalancerIpRanges: readonly string[];
  readonly clusterIpRanges: readonly string[];
}

/** An option that holds a CIDR of either family; the plugins' schemas share it, so that one means the same everywhere. */
export const cidrOption = z.string().refine((value) => parseCidr(value) !== undefined, 'must be a CIDR such as 192.0.2.0/24');

/**
 * kube-router's --strict-external-ip-validation and its ranges, as every plugin that programs or announces Service
 * addresses takes them: a plugin's schema spreads these fields into its own, so that they mean the same everywhere.
 * Off by default in a plugin (every address is used); the agent passes the flag, whose default (true) is
 * kube-router's.
 */
export const strictServiceAddressOptionFields = {
  /**
   * --strict-external-ip-validation (kube-router 2.8): use only the externalIPs within serviceExternalIpRanges and the
   * LoadBalancer IPs within loadBalancerIpRanges, neither inside serviceClusterIpRanges; with no range of a kind, none
   * of that kind.
   */
  strictExternalIpValidation: z.boolean().default(false),
  /** --service-external-ip-range. */
  serviceExternalIpRanges: z.array(cidrOption).default([]),
  /** --loadbalancer-ip-range. */
  loadBalancerIpRanges: z.array(cidrOption).default([]),
  /** --service-cluster-ip-range. */
  serviceClusterIpRanges: z.array(cidrOption).default([]),
};

/** The validator's ranges when the options turn strict validation on; undefined when every address may be used. */
export function strictServiceAddressRanges(options: {
  readonly strictExternalIpValidation: boolean;
  readonly serviceExternalIpRanges: readonly string[];
  readonly loadBalancerIpRanges: readonly string[];
  readonly serviceClusterIpRanges: readonly string[];
}): ServiceAddressRanges | undefined {
  if (!options.strictExternalIpValidation) return undefined;
  return {
    externalIpRanges: options.serviceExternalIpRanges,
    loadBalancerIpRanges: options.loadBalancerIpRanges,
    clusterIpRanges: options.serviceClusterIpRanges,
  };
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
    if (!isIp(address)) return 'it is not an IP address';
    if (parsed[kind].length === 0) return `no ${flag} is configured (strict validation denies every ${kind})`;
    if (inCidrs(address, parsed.cluster)) return 'it lies in --service-cluster-ip-range';
    if (!inCidrs(address, parsed[kind])) return `it is not within ${flag}`;
    return undefined;
  };
}

function parseValid(cidrs: readonly string[]) {
  return parseCidrs(cidrs.filter((cidr) => parseCidr(cidr) !== undefined));
}
