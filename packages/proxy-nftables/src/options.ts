import { cidrOption, strictServiceAddressOptionFields } from '@kube-router/kube';
import { z } from 'zod';
import type { IpFamily } from '@kube-router/netfilter';

/**
 * The options of proxy-nftables. Every name shared with proxy-ipvs has the same meaning, so the agent maps the same
 * kube-router flags onto either proxy.
 */
export const proxyNftablesOptions = z.strictObject({
  /** --enable-ipv4 / --enable-ipv6: which families get a table and their Service addresses programmed. */
  enableIpv4: z.boolean().default(true),
  enableIpv6: z.boolean().default(false),
  /** --ipvs-sync-period: the periodic full sync, which reads the tables back and repairs drift. */
  syncPeriodMs: z.number().int().positive().default(300_000),
  minSyncIntervalMs: z.number().int().nonnegative().optional(),
  syncTimeoutMs: z.number().int().nonnegative().optional(),
  /** Runs every command inside this network namespace (tests, the lab). */
  netns: z.string().min(1).optional(),
  /** Deadline of each nft, conntrack or ip command. */
  commandTimeoutMs: z.number().int().positive().default(60_000),
  /** --nodeport-bindon-all-ip: NodePorts on every local address instead of the Node's InternalIP/ExternalIP. */
  nodePortBindOnAllIp: z.boolean().default(false),
  /** --masquerade-all: SNAT all Service traffic, not only what comes from outside the pod CIDRs. */
  masqueradeAll: z.boolean().default(false),
  /** Traffic from these is not masqueraded (unless masqueradeAll); empty: the Node's pod CIDRs (kube's nodePodCidrs). */
  podCidrs: z.array(cidrOption).default([]),
  /**
   * --strict-external-ip-validation and its ranges: only the externalIPs and LoadBalancer IPs they allow are
   * programmed; each refused address is a Warning on its Service.
   */
  ...strictServiceAddressOptionFields,
  /** --service-proxy-name: Services labelled service.kubernetes.io/service-proxy-name with another value are skipped. */
  serviceProxyName: z.string().default('kube-router'),
  /** healthCheckNodePort servers listen on this address (kube-router: every address). */
  healthCheckBindAddress: z.string().default('0.0.0.0'),
});

export type ProxyNftablesOptions = z.input<typeof proxyNftablesOptions>;
export type ResolvedProxyNftablesOptions = z.output<typeof proxyNftablesOptions>;

/** The families --enable-ipv4 and --enable-ipv6 turn on, IPv4 first. */
export function enabledFamilies(options: Pick<ResolvedProxyNftablesOptions, 'enableIpv4' | 'enableIpv6'>): IpFamily[] {
  return [...(options.enableIpv4 ? (['ipv4'] as const) : []), ...(options.enableIpv6 ? (['ipv6'] as const) : [])];
}
