import { cidrOption, strictServiceAddressOptionFields } from '@kube-router/kube';
import { z } from 'zod';
import type { IpFamily } from '@kube-router/netfilter';

export const proxyIpvsOptions = z.strictObject({
  /** --enable-ipv4 / --enable-ipv6: which families of Service addresses are programmed. */
  enableIpv4: z.boolean().default(true),
  enableIpv6: z.boolean().default(false),
  /** --ipvs-sync-period. */
  syncPeriodMs: z.number().int().positive().default(300_000),
  minSyncIntervalMs: z.number().int().nonnegative().optional(),
  syncTimeoutMs: z.number().int().nonnegative().optional(),
  /** Runs every command inside this network namespace (tests, the lab). */
  netns: z.string().min(1).optional(),
  /** Deadline of each ipvsadm, ip, ipset, iptables or sysctl command. */
  commandTimeoutMs: z.number().int().positive().default(60_000),
  /** --nodeport-bindon-all-ip: NodePorts on every local address instead of the Node's InternalIP/ExternalIP. */
  nodePortBindOnAllIp: z.boolean().default(false),
  /** --masquerade-all: SNAT all IPVS traffic, not only what comes from outside the pod CIDR. */
  masqueradeAll: z.boolean().default(false),
  /** Traffic from these is not masqueraded (unless masqueradeAll); empty: the Node's pod CIDRs (kube's nodePodCidrs: its annotations, else spec.podCIDRs). */
  podCidrs: z.array(cidrOption).default([]),
  /** --excluded-cidrs: IPVS services and VIPs in these are never cleaned up. */
  excludedCidrs: z.array(cidrOption).default([]),
  /** --hairpin-mode: every Service gets hairpin SNAT, not only those annotated kube-router.io/service.hairpin. */
  hairpinMode: z.boolean().default(false),
  /** --ipvs-permit-all: the KUBE-ROUTER-SERVICES filter chain rejects unknown ports on service IPs. */
  ipvsPermitAll: z.boolean().default(true),
  /** --ipvs-graceful-termination: removed endpoints get weight 0 and are deleted once drained. */
  gracefulTermination: z.boolean().default(false),
  /** --ipvs-graceful-period. */
  gracefulPeriodMs: z.number().int().nonnegative().default(30_000),
  /** --service-tcp-timeout, --service-tcpfin-timeout, --service-udp-timeout in seconds; 0 keeps the kernel's. */
  tcpTimeoutSeconds: z.number().int().nonnegative().default(0),
  tcpFinTimeoutSeconds: z.number().int().nonnegative().default(0),
  udpTimeoutSeconds: z.number().int().nonnegative().default(0),
  /**
   * --strict-external-ip-validation and its ranges: only the externalIPs and LoadBalancer IPs they allow are
   * programmed; each refused address is a Warning on its Service.
   */
  ...strictServiceAddressOptionFields,
  /** --service-proxy-name: Services labelled service.kubernetes.io/service-proxy-name with another value are skipped. */
  serviceProxyName: z.string().default('kube-router'),
  /** healthCheckNodePort servers listen on this address (kube-router: every address). */
  healthCheckBindAddress: z.string().default('0.0.0.0'),
  /** Which iptables binaries: `default`, `nft` or `legacy`. */
  iptablesBackend: z.enum(['default', 'nft', 'legacy']).default('default'),
  /** Sets kube-router's IPVS and ARP sysctls at every full sync. */
  setSysctls: z.boolean().default(true),
});

export type ProxyIpvsOptions = z.input<typeof proxyIpvsOptions>;
export type ResolvedProxyIpvsOptions = z.output<typeof proxyIpvsOptions>;

/** The families --enable-ipv4 and --enable-ipv6 turn on, IPv4 first. */
export function enabledFamilies(options: Pick<ResolvedProxyIpvsOptions, 'enableIpv4' | 'enableIpv6'>): IpFamily[] {
  return [...(options.enableIpv4 ? (['ipv4'] as const) : []), ...(options.enableIpv6 ? (['ipv6'] as const) : [])];
}
