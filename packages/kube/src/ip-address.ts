import { isIPv4, isIPv6 } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * IP addresses read from untrusted text (Kubernetes objects, annotations, flags) the way Go's net.ParseIP and the
 * kernel read them, not the way ipaddr.js's lenient parse does: ipaddr.js reads `010.0.0.1` as octal 8.0.0.1, `10.1`
 * as 10.0.0.1, and `::1.2.3.4` as the IPv4-mapped ::ffff:1.2.3.4; and it keeps an IPv6 zone (`fe80::1%eth0`) that
 * no route, ipset or IPVS service can take. Each of those was once programmed into the kernel as a different address.
 */

export type IpFamily = 'ipv4' | 'ipv6';

export interface ParsedIp {
  family: IpFamily;
  /** Canonical text: dotted quad, or RFC 5952 IPv6 (`2001:db8::1`); an IPv4-mapped IPv6 address is its IPv4 one. */
  text: string;
  address: ipaddr.IPv4 | ipaddr.IPv6;
}

/**
 * The address `text` names, or undefined when it is not one: IPv4 only as four decimal parts without leading zeros
 * (Node's isIPv4, as Go since 1.17), IPv6 without a zone. An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`) is read as
 * its IPv4 address, as Go's To4() reads it; `::1.2.3.4` stays the IPv6 address ::102:304.
 */
export function parseIp(text: string): ParsedIp | undefined {
  if (typeof text !== 'string') return undefined;
  if (isIPv4(text)) {
    const address = ipaddr.IPv4.parse(text);
    return { family: 'ipv4', text: address.toString(), address };
  }
  if (!isIPv6(text) || text.includes('%')) return undefined;
  const address = ipaddr.IPv6.parse(withHexTail(text));
  if (address.isIPv4MappedAddress()) {
    const v4 = address.toIPv4Address();
    return { family: 'ipv4', text: v4.toString(), address: v4 };
  }
  return { family: 'ipv6', text: address.toRFC5952String(), address };
}

/** Whether `text` is an address as parseIp reads it. */
export function isIp(text: string): boolean {
  return parseIp(text) !== undefined;
}

/**
 * ipaddr.js turns any dotted tail into ::ffff:a.b.c.d, whatever precedes it (a bug for `::1.2.3.4`); two hex groups
 * in its place keep the groups written. Node's isIPv6 has already refused a tail that is not a plain dotted quad.
 */
function withHexTail(text: string): string {
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (!tail.includes('.')) return text;
  const [a = 0, b = 0, c = 0, d = 0] = tail.split('.').map(Number);
  return `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
}

export interface IpCidr {
  family: IpFamily;
  /** The address as written (host bits kept), parsed as parseIp parses it. */
  address: ipaddr.IPv4 | ipaddr.IPv6;
  /** The address with its host bits cleared: net.ParseCIDR's IPNet, which is how kube-router reads `10.1.2.3/16`. */
  network: ipaddr.IPv4 | ipaddr.IPv6;
  prefixLength: number;
  /** The network in canonical text, as Go's IPNet.String() gives it: `10.1.0.0/16`, `fd00:1::/32`. */
  cidr: string;
}

/**
 * A CIDR as Go's net.ParseCIDR reads it: an address parseIp takes, `/`, a plain decimal prefix length (`/08` is
 * none) within the family. An IPv4-mapped IPv6 network (`::ffff:10.0.0.0/104`) is refused: parseIp reads its address
 * as IPv4, which would take the wrong prefix length. ipaddr.js's parseCIDR read `010.244.0.0/24` as 8.244.0.0/24.
 */
export function parseCidr(text: string): IpCidr | undefined {
  if (typeof text !== 'string') return undefined;
  const slash = text.indexOf('/');
  const addressText = text.slice(0, slash);
  const prefix = text.slice(slash + 1);
  const parsed = slash < 0 ? undefined : parseIp(addressText);
  if (parsed === undefined || !/^(0|[1-9]\d{0,2})$/.test(prefix)) return undefined;
  if (parsed.family === 'ipv4' && addressText.includes(':')) return undefined;
  const prefixLength = Number(prefix);
  if (prefixLength > (parsed.family === 'ipv4' ? 32 : 128)) return undefined;
  const spelled = `${parsed.address.toString()}/${prefixLength}`;
  const network = parsed.family === 'ipv4' ? ipaddr.IPv4.networkAddressFromCIDR(spelled) : ipaddr.IPv6.networkAddressFromCIDR(spelled);
  return { family: parsed.family, address: parsed.address, network, prefixLength, cidr: `${network.toString()}/${prefixLength}` };
}
