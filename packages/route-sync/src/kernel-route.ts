import type { InjectedRoute } from '@kube-router/controller';
import { parseCidr, parseIp } from '@kube-router/kube';
import type { IpFamily, IpRoute } from '@kube-router/netfilter';

/** The kernel's main routing table, where a route without a table goes. */
export const MAIN_TABLE = 254;

/** A route in the form route-sync compares and programs: validated, canonical, with its family and table. */
export interface KernelRoute {
  readonly family: IpFamily;
  /** Canonical CIDR: network address, RFC 5952 for IPv6, always with a prefix length. */
  readonly destination: string;
  readonly gateway?: string;
  readonly device?: string;
  readonly table: number;
}

/** A route of ours found in the kernel; `metric` is kept so that a duplicate can be deleted exactly. */
export interface InstalledRoute extends KernelRoute {
  readonly metric?: number;
}

export class InvalidRouteError extends Error {
  constructor(route: InjectedRoute, reason: string) {
    super(`invalid route ${JSON.stringify(route)}: ${reason}`);
    this.name = 'InvalidRouteError';
  }
}

/** The identity of a route in the kernel (with the default metric): one route per destination and table. */
export function routeKey(route: Pick<KernelRoute, 'destination' | 'table'>): string {
  return route.table === MAIN_TABLE ? route.destination : `${route.destination} table ${route.table}`;
}

/** What a failure of this route is reported against. */
export function routeObject(route: Pick<KernelRoute, 'destination' | 'table'>): string {
  return `route/${routeKey(route)}`;
}

// Interface names reach `ip -batch` as words: anything that could split or extend a command is refused.
const DEVICE_NAME = /^[A-Za-z0-9_.:-]{1,15}$/;

/** Validates a handed route and brings it to canonical form; throws InvalidRouteError with the reason. */
export function toKernelRoute(route: InjectedRoute): KernelRoute {
  const destination = canonicalCidr(route.destination);
  if (destination === undefined) throw new InvalidRouteError(route, 'destination is not a CIDR');
  const family: IpFamily = destination.includes(':') ? 'ipv6' : 'ipv4';
  let gateway: string | undefined;
  if (route.gateway !== undefined) {
    const address = canonicalAddress(route.gateway);
    if (address === undefined) throw new InvalidRouteError(route, 'gateway is not an IP address');
    if (address[0] !== (family === 'ipv4' ? '4' : '6')) {
      throw new InvalidRouteError(route, 'gateway is not of the destination family');
    }
    gateway = address.slice(2);
  }
  if (route.device !== undefined && !DEVICE_NAME.test(route.device)) {
    throw new InvalidRouteError(route, 'device is not an interface name');
  }
  if (gateway === undefined && route.device === undefined) {
    throw new InvalidRouteError(route, 'a route needs a gateway, a device or both');
  }
  const table = route.table ?? MAIN_TABLE;
  // 0 is unspecified and 253-255 are the kernel's default, main and local tables: only main is ours to write in.
  if (!Number.isInteger(table) || table < 1 || table > 0xffffffff || (table >= 253 && table !== MAIN_TABLE)) {
    throw new InvalidRouteError(route, 'table must be main (254) or a table number 1-252 or above 255');
  }
  return { family, destination, table, ...(gateway !== undefined && { gateway }), ...(route.device !== undefined && { device: route.device }) };
}

/** A route as `ip -j route show table all proto <n>` lists it, in KernelRoute form; undefined when unreadable. */
export function fromIpRoute(family: IpFamily, listed: IpRoute): InstalledRoute | undefined {
  const destination = listedDestination(family, listed.dst);
  if (destination === undefined) return undefined;
  // ip names a table only when it is not main, by number or by its rt_tables name; names are not ours to own.
  const table = listed.table === undefined ? MAIN_TABLE : Number(listed.table);
  if (!Number.isInteger(table)) return undefined;
  const gateway = listed.gateway === undefined ? undefined : canonicalAddress(listed.gateway)?.slice(2);
  return {
    family,
    destination,
    table,
    ...(gateway !== undefined && { gateway }),
    ...(listed.dev !== undefined && { device: listed.dev }),
    ...(listed.metric !== undefined && { metric: listed.metric }),
  };
}

function listedDestination(family: IpFamily, dst: string): string | undefined {
  if (dst === 'default') return family === 'ipv4' ? '0.0.0.0/0' : '::/0';
  // ip prints a host route without its prefix length.
  return canonicalCidr(dst.includes('/') ? dst : `${dst}/${family === 'ipv4' ? 32 : 128}`);
}

/**
 * Canonical forms by their input text. Every sync meets the same few thousand strings (the wanted set, the kernel
 * listing); parsing them again each time was most of a no-change pass. Bounded: cleared when it outgrows any
 * plausible route table.
 */
const canonicalCache = new Map<string, string | undefined>();
const CANONICAL_CACHE_LIMIT = 200_000;

function cached(key: string, compute: () => string | undefined): string | undefined {
  if (canonicalCache.has(key)) return canonicalCache.get(key);
  if (canonicalCache.size >= CANONICAL_CACHE_LIMIT) canonicalCache.clear();
  const value = compute();
  canonicalCache.set(key, value);
  return value;
}

/** A CIDR as network address and prefix length; undefined when it is not one. */
function canonicalCidr(text: string): string | undefined {
  return cached(`cidr ${text}`, () => {
    const parsed = parseCidr(text);
    return parsed?.cidr;
  });
}

/**
 * An address in canonical form, `4 ` or `6 ` in front; undefined when it is not one. kube's parseIp refuses what
 * ipaddr.js would misread (`10`, `0x0a.1`, `012.1.1.1`, typos in a route far more often than intent) and a zoned
 * IPv6 address (`fe80::1%eth0`), which `ip` cannot parse: it stopped the whole batch, and every route after it.
 */
function canonicalAddress(text: string): string | undefined {
  return cached(`ip ${text}`, () => {
    const parsed = parseIp(text);
    return parsed && `${parsed.family === 'ipv4' ? 4 : 6} ${parsed.text}`;
  });
}

/** Whether the installed route already is the wanted one: same next hop, and the wanted device if one is named. */
export function sameRoute(wanted: KernelRoute, installed: InstalledRoute): boolean {
  return wanted.gateway === installed.gateway && (wanted.device === undefined || wanted.device === installed.device);
}

/** The kernel's default metric of a route added without one: IPv6 routes get 1024. */
export function hasDefaultMetric(route: InstalledRoute): boolean {
  return route.metric === undefined || route.metric === (route.family === 'ipv6' ? 1024 : 0);
}
