import { cidrOption } from '@kube-router/kube';
import { z } from 'zod';
import type { IpFamily } from '../model.js';

const portRange = z
  .string()
  .regex(/^\d{1,5}[-:]\d{1,5}$/, 'a port range such as 30000-32767')
  .refine((text) => {
    const [low, high] = text.split(/[-:]/).map(Number) as [number, number];
    return low >= 1 && high <= 65535 && low <= high;
  }, 'ports must be 1-65535 and the first must not exceed the second');

/**
 * The options both netpol backends take, with kube-router's flag names in the comments. A backend's schema is
 * `z.strictObject({ ...netpolOptionFields, ...its own })`, so that an option means the same on either.
 */
export const netpolOptionFields = {
  /** --enable-ipv4: enforce for IPv4. */
  enableIpv4: z.boolean().default(true),
  /** --enable-ipv6: enforce for IPv6. Off by default, as the flag is, so that a flag and a plugin option agree. */
  enableIpv6: z.boolean().default(false),
  /**
   * --netpol-default-deny, as kube-router means it: traffic to or from an address of this node's pod CIDRs (Node
   * spec.podCIDRs, or the annotations kube-router.io/pod-cidrs / kube-router.io/pod-cidr) whose pod's rules are not
   * programmed yet is rejected, which closes the start-up race. Pods that no policy selects stay open.
   */
  defaultDeny: z.boolean().default(false),
  /** Not a kube-router flag: local pods that no policy selects are isolated in both directions (a true default deny). */
  isolateUnselectedPods: z.boolean().default(false),
  /** --iptables-sync-period: the periodic sync, which also reads the kernel back to repair drift. */
  syncPeriodMs: z.number().int().positive().default(300_000),
  minSyncIntervalMs: z.number().int().nonnegative().optional(),
  syncTimeoutMs: z.number().int().nonnegative().optional(),
  /** Runs every command of the backend inside this network namespace. */
  netns: z.string().min(1).optional(),
  /** --service-cluster-ip-range (repeatable, either family): traffic to these is left to the service proxy. */
  serviceClusterIpRanges: z.array(cidrOption).default(['10.96.0.0/12']),
  /** --service-external-ip-range. */
  serviceExternalIpRanges: z.array(cidrOption).default([]),
  /** --service-node-port-range. */
  nodePortRange: portRange.default('30000-32767'),
  /** Which iptables binaries: `default` (whatever iptables points to), `nft` or `legacy`. */
  iptablesBackend: z.enum(['default', 'nft', 'legacy']).default('default'),
  /** Deadline of each command the backend runs. */
  commandTimeoutMs: z.number().int().positive().default(60_000),
  /**
   * --netpol-drop-log: read the rejected packets the pod chains log to NFLOG group 100 (through tcpdump) and log each
   * with the pods on either side. Off: no reader, no process.
   */
  dropLog: z.boolean().default(false),
  /** --netpol-drop-log-events: with dropLog, a Warning Event (PolicyDrop) on the pod each logged drop was meant for. */
  dropLogEvents: z.boolean().default(false),
  /** Not a kube-router flag: per (source, destination, port, protocol), one drop line at once, then one per this window. */
  dropLogIntervalMs: z.number().int().nonnegative().default(10_000),
};

/** The options of either backend as a caller writes them (defaults left out). */
export type NetpolOptions = z.input<z.ZodObject<typeof netpolOptionFields>>;
/** The options of either backend once parsed: what the controller reads. */
export type ResolvedNetpolOptions = z.output<z.ZodObject<typeof netpolOptionFields>>;

/** The families to enforce for, in order; refuses options that enable neither. */
export function netpolFamilies(options: { readonly enableIpv4: boolean; readonly enableIpv6: boolean }): IpFamily[] {
  const families: IpFamily[] = [];
  if (options.enableIpv4) families.push('ipv4');
  if (options.enableIpv6) families.push('ipv6');
  if (families.length === 0) throw new Error('netpol: enableIpv4 and enableIpv6 are both false');
  return families;
}
