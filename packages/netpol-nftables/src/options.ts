import { cidrOption } from '@kube-router/kube';
import { netpolOptionFields } from '@kube-router/netpol';
import { z } from 'zod';

export const netpolNftablesOptions = z.strictObject({
  // enableIpv4 / enableIpv6 program the tables `kube-router-filter-ipv4` / `kube-router-filter-ipv6`.
  ...netpolOptionFields,
  /** --loadbalancer-ip-range: traffic to these is left to the service proxy, like the cluster IP ranges. */
  serviceLoadBalancerIpRanges: z.array(cidrOption).default([]),
  /**
   * Remove what the iptables backend left (jumps, chains, ipsets) once our tables enforce, so that a switch of
   * backend leaves one enforcer; iptablesBackend says which iptables binaries it looks with.
   */
  removeIptablesLeftovers: z.boolean().default(true),
});

export type NetpolNftablesOptions = z.input<typeof netpolNftablesOptions>;
export type ResolvedNetpolNftablesOptions = z.output<typeof netpolNftablesOptions>;
