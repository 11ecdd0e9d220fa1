import { z } from 'zod';

const portRange = z
  .string()
  .regex(/^\d{1,5}[-:]\d{1,5}$/, 'a port range such as 30000-32767')
  .refine((text) => {
    const [low, high] = text.split(/[-:]/).map(Number) as [number, number];
    return low >= 1 && high <= 65535 && low <= high;
  }, 'ports must be 1-65535 and the first must not exceed the second');

export const netpolIptablesOptions = z.strictObject({
  /** --enable-ipv4: program iptables and inet sets. */
  enableIpv4: z.boolean().default(true),
  /** --enable-ipv6: program ip6tables and inet6 sets. */
  enableIpv6: z.boolean().default(true),
  /**
   * --netpol-default-deny, as kube-router means it: traffic to or from an address of this node's pod CIDRs (Node
   * spec.podCIDRs, or the annotations kube-router.io/pod-cidrs / kube-router.io/pod-cidr) whose pod's rules are not
   * programmed yet is rejected, which closes the start-up race. Pods that no policy selects stay open.
   */
  defaultDeny: z.boolean().default(false),
  /** Not a kube-router flag: local pods that no policy selects are isolated in both directions. */
  isolateUnselectedPods: z.boolean().default(false),
  /** --iptables-sync-period. */
  syncPeriodMs: z.number().int().positive().default(300_000),
  minSyncIntervalMs: z.number().int().nonnegative().optional(),
  syncTimeoutMs: z.number().int().nonnegative().optional(),
  /** Runs every iptables and ipset command inside this network namespace. */
  netns: z.string().min(1).optional(),
  /** --service-cluster-ip-range (repeatable, either family): traffic to these is left to the service proxy. */
  serviceClusterIpRanges: z.array(z.string()).default(['10.96.0.0/12']),
  /** --service-external-ip-range. */
  serviceExternalIpRanges: z.array(z.string()).default([]),
  /** --service-node-port-range. */
  nodePortRange: portRange.default('30000-32767'),
  /** Which iptables binaries: `default` (whatever iptables points to), `nft` or `legacy`. */
  iptablesBackend: z.enum(['default', 'nft', 'legacy']).default('default'),
  /** Deadline of each iptables or ipset command. */
  commandTimeoutMs: z.number().int().positive().default(60_000),
});

export type NetpolIptablesOptions = z.input<typeof netpolIptablesOptions>;
export type ResolvedNetpolIptablesOptions = z.output<typeof netpolIptablesOptions>;
