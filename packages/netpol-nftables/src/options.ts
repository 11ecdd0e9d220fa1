import { z } from 'zod';

const portRange = z
  .string()
  .regex(/^\d{1,5}[-:]\d{1,5}$/, 'a port range such as 30000-32767')
  .refine((text) => {
    const [low, high] = text.split(/[-:]/).map(Number) as [number, number];
    return low >= 1 && high <= 65535 && low <= high;
  }, 'ports must be 1-65535 and the first must not exceed the second');

export const netpolNftablesOptions = z.strictObject({
  /** --enable-ipv4: program the table `kube-router-filter-ipv4`. */
  enableIpv4: z.boolean().default(true),
  /** --enable-ipv6: program the table `kube-router-filter-ipv6`. */
  enableIpv6: z.boolean().default(true),
  /**
   * --netpol-default-deny, as kube-router means it: traffic to or from an address of this node's pod CIDRs whose
   * pod's rules are not programmed yet is rejected (a start-up race closed). Pods no policy selects stay open.
   */
  defaultDeny: z.boolean().default(false),
  /** Not a kube-router flag: isolate every local pod that no policy selects, both ways (a true default deny). */
  isolateUnselectedPods: z.boolean().default(false),
  /** --iptables-sync-period: the periodic sync that also reads the tables back to repair drift. */
  syncPeriodMs: z.number().int().positive().default(300_000),
  minSyncIntervalMs: z.number().int().nonnegative().optional(),
  syncTimeoutMs: z.number().int().nonnegative().optional(),
  /** Runs every nft (and cleanup iptables/ipset) command inside this network namespace. */
  netns: z.string().min(1).optional(),
  /** --service-cluster-ip-range (repeatable, either family): traffic to these is left to the service proxy. */
  serviceClusterIpRanges: z.array(z.string()).default(['10.96.0.0/12']),
  /** --service-external-ip-range. */
  serviceExternalIpRanges: z.array(z.string()).default([]),
  /** --loadbalancer-ip-range. */
  serviceLoadBalancerIpRanges: z.array(z.string()).default([]),
  /** --service-node-port-range. */
  nodePortRange: portRange.default('30000-32767'),
  /** Deadline of each nft command. */
  commandTimeoutMs: z.number().int().positive().default(60_000),
  /**
   * Remove what the iptables backend left (jumps, chains, ipsets) once our tables enforce, so that a switch of
   * backend leaves one enforcer. Which iptables binaries it looks with.
   */
  removeIptablesLeftovers: z.boolean().default(true),
  iptablesBackend: z.enum(['default', 'nft', 'legacy']).default('default'),
});

export type NetpolNftablesOptions = z.input<typeof netpolNftablesOptions>;
export type ResolvedNetpolNftablesOptions = z.output<typeof netpolNftablesOptions>;
