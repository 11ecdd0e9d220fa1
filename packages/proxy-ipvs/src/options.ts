import { cidrOption, serviceProxyOptionFields } from '@kube-router/kube';
import { z } from 'zod';

/**
 * The options of proxy-ipvs: those both proxies have (kube's serviceProxyOptionFields: families, periods, netns,
 * NodePort addresses, masquerading, address validation, --service-proxy-name, the health check address) and IPVS's own.
 */
export const proxyIpvsOptions = z.strictObject({
  ...serviceProxyOptionFields,
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
  /** Which iptables binaries: `default`, `nft` or `legacy`. */
  iptablesBackend: z.enum(['default', 'nft', 'legacy']).default('default'),
  /** Sets kube-router's IPVS and ARP sysctls at every full sync. */
  setSysctls: z.boolean().default(true),
});

export type ProxyIpvsOptions = z.input<typeof proxyIpvsOptions>;
export type ResolvedProxyIpvsOptions = z.output<typeof proxyIpvsOptions>;
