import { netpolOptionFields } from '@kube-router/netpol';
import { z } from 'zod';

/** enableIpv4 / enableIpv6 program iptables and inet sets / ip6tables and inet6 sets. */
export const netpolIptablesOptions = z.strictObject(netpolOptionFields);

export type NetpolIptablesOptions = z.input<typeof netpolIptablesOptions>;
export type ResolvedNetpolIptablesOptions = z.output<typeof netpolIptablesOptions>;
