import ipaddr from 'ipaddr.js';
import type { IpFamily } from './model.js';

export interface ParsedIp {
  readonly family: IpFamily;
  /** Canonical text: dotted quad, or RFC 5952 for IPv6. */
  readonly text: string;
}

export interface ParsedCidr {
  readonly family: IpFamily;
  /** The network address in canonical text with its prefix length, e.g. `10.0.0.0/24`. */
  readonly text: string;
  readonly network: ipaddr.IPv4 | ipaddr.IPv6;
  readonly prefixLength: number;
  /** The input had host bits set (`10.0.0.1/24`). */
  readonly hadHostBits: boolean;
}

/**
 * Parses one IP address strictly: four-part decimal IPv4 without leading zeros, or IPv6 without a zone. Returns
 * undefined for anything else.
 */
export function parseIp(text: string): ParsedIp | undefined {
  if (typeof text !== 'string') return undefined;
  const quad = DOTTED_QUAD.exec(text);
  if (quad) {
    // Every pod has an IPv4 address to read; checking the octets directly avoids building an address object for it.
    for (let i = 1; i <= 4; i++) {
      const octet = quad[i] as string;
      if ((octet.length > 1 && octet.startsWith('0')) || Number(octet) > 255) return undefined;
    }
    return { family: 'ipv4', text };
  }
  // ipaddr.js reports invalid input by throwing, which is slow; the shape check keeps most non-addresses off that path.
  if (!text.includes(':') || text.includes('%')) return undefined;
  try {
    return { family: 'ipv6', text: ipaddr.IPv6.parse(text).toRFC5952String() };
  } catch {
    return undefined;
  }
}

const DOTTED_QUAD = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

/** Parses `address/prefix`; throws an Error saying what is wrong. */
export function parseCidr(text: string): ParsedCidr {
  if (typeof text !== 'string') throw new Error(`expected a CIDR string, got ${typeof text}`);
  const slash = text.indexOf('/');
  if (slash < 0) throw new Error(`${JSON.stringify(text)} is not a CIDR: missing /prefix`);
  const ip = parseIp(text.slice(0, slash));
  const prefixText = text.slice(slash + 1);
  if (!ip) throw new Error(`${JSON.stringify(text)} is not a CIDR: invalid address`);
  const maxPrefix = ip.family === 'ipv4' ? 32 : 128;
  if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > maxPrefix) {
    throw new Error(`${JSON.stringify(text)} is not a CIDR: prefix length must be 0..${maxPrefix}`);
  }
  const prefixLength = Number(prefixText);
  const network = maskAddress(ip, prefixLength);
  const networkText = network.kind() === 'ipv6' ? (network as ipaddr.IPv6).toRFC5952String() : network.toString();
  return {
    family: ip.family,
    text: `${networkText}/${prefixLength}`,
    network,
    prefixLength,
    hadHostBits: networkText !== ip.text,
  };
}

function maskAddress(ip: ParsedIp, prefixLength: number): ipaddr.IPv4 | ipaddr.IPv6 {
  const bytes = addressOf(ip).toByteArray();
  for (let i = 0; i < bytes.length; i++) {
    const bitsHere = Math.min(8, Math.max(0, prefixLength - i * 8));
    bytes[i] = (bytes[i] as number) & ((0xff << (8 - bitsHere)) & 0xff);
  }
  return ipaddr.fromByteArray(bytes);
}

export function cidrContainsIp(cidr: ParsedCidr, ip: ParsedIp): boolean {
  return cidr.family === ip.family && addressOf(ip).match(cidr.network, cidr.prefixLength);
}

/** `inner` lies inside `outer` and is smaller (what Kubernetes requires of an ipBlock's except). */
export function cidrStrictlyContains(outer: ParsedCidr, inner: ParsedCidr): boolean {
  return (
    outer.family === inner.family &&
    inner.prefixLength > outer.prefixLength &&
    inner.network.match(outer.network, outer.prefixLength)
  );
}

function addressOf(ip: ParsedIp): ipaddr.IPv4 | ipaddr.IPv6 {
  return ip.family === 'ipv4' ? ipaddr.IPv4.parse(ip.text) : ipaddr.IPv6.parse(ip.text);
}
