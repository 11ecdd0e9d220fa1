import { serviceProxyOptionFields } from '@kube-router/kube';
import { z } from 'zod';

/**
 * The options of proxy-nftables: those both proxies have (kube's serviceProxyOptionFields, the same names and meanings
 * as proxy-ipvs's, so the agent maps the same kube-router flags onto either) and nothing of its own yet.
 */
export const proxyNftablesOptions = z.strictObject({ ...serviceProxyOptionFields });

export type ProxyNftablesOptions = z.input<typeof proxyNftablesOptions>;
export type ResolvedProxyNftablesOptions = z.output<typeof proxyNftablesOptions>;
