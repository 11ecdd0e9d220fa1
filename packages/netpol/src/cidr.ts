import ipaddr from 'ipaddr.js';
import type { IpFamily } from './model.js';

export interface ParsedIp {
  readonly family: IpFamily;
  /** Canonical text: dotted quad, or RFC 5952 for IPv6. */
  readonly text: string;
  /** The address as a number, for range lookups without parsing the text again. */
  readonly value: bigint;
}

export interface ParsedCidr {
  readonly family: IpFamily;
  /** The network address in canonical text with its prefix length, e.g. `10.0.0.0/24`. */
  readonly text: string;
  readonly network: ipaddr.IPv4 | ipaddr.IPv6;
  readonly prefixLength: number;
  /** The input had host bits set (`10.0.0.1/24`). */
  readonly hadHostBits: boolean;
  /** The first and last address of the CIDR as numbers. */
  readonly first: bigint;
  readonly last: bigint;
}

/**
 * Parses one IP address strictly: four-part decimal IPv4 without leading zeros, or IPv6 without a zone. Returns
 * undefined for anything else.
 */
export function parseIp(text: string): ParsedIp | undefined {
  if (typeof text !== 'string') return undefined;
  const ipv4 = dottedQuadValue(text);
  if (ipv4 !== undefined) return new ParsedIpv4(text, ipv4);
  if (!text.includes(':')) return undefined;
  // Only hex digits, colons and the dots of an embedded IPv4 part: no zone, and nothing the URL parser below would
  // read as the end of a host (`]`, `/`) and then ignore.
  if (!IPV6_CHARACTERS.test(text)) return undefined;
  let host: string;
  try {
    // The WHATWG URL host parser (Node's own, native) validates an IPv6 address and serialises it as RFC 5952
    // does, in about a tenth of the time ipaddr.js takes; every dual-stack pod has an address to read this way.
    host = new URL(`http://[${text}]/`).hostname;
  } catch {
    return undefined;
  }
  return new ParsedIpv6(host.slice(1, -1));
}

const IPV6_CHARACTERS = /^[0-9A-Fa-f:.]+$/;

/**
 * The number of a four-part decimal IPv4 address without leading zeros; undefined for anything else. Read character
 * by character: every pod has an IPv4 address to read, and a regular expression's match would allocate for each.
 */
function dottedQuadValue(text: string): number | undefined {
  let value = 0;
  let octet = 0;
  let digits = 0;
  let parts = 0;
  for (let index = 0; index <= text.length; index++) {
    const code = index === text.length ? 46 : text.charCodeAt(index);
    if (code === 46) {
      // '.', or the end: one octet done.
      if (digits === 0 || ++parts > 4) return undefined;
      value = value * 256 + octet;
      octet = 0;
      digits = 0;
    } else if (code >= 48 && code <= 57) {
      if (digits === 1 && octet === 0) return undefined;
      octet = octet * 10 + (code - 48);
      if (++digits > 3 || octet > 255) return undefined;
    } else {
      return undefined;
    }
  }
  return parts === 4 ? value : undefined;
}

/** An IPv4 address; its BigInt is made when a range lookup first asks for it. */
class ParsedIpv4 implements ParsedIp {
  readonly family = 'ipv4';
  readonly text: string;
  readonly #number: number;
  #value: bigint | undefined;

  constructor(text: string, number: number) {
    this.text = text;
    this.#number = number;
  }

  get value(): bigint {
    return (this.#value ??= BigInt(this.#number));
  }
}

/** An IPv6 address whose number is worked out when a range lookup first asks for it: most addresses never meet one. */
class ParsedIpv6 implements ParsedIp {
  readonly family = 'ipv6';
  readonly text: string;
  #value: bigint | undefined;

  constructor(canonical: string) {
    this.text = canonical;
  }

  get value(): bigint {
    // One BigInt from the hex of the eight 16-bit parts: far cheaper than shifting in sixteen bytes.
    this.#value ??= BigInt(`0x${ipaddr.IPv6.parse(this.text).parts.map((part) => part.toString(16).padStart(4, '0')).join('')}`);
    return this.#value;
  }
}

function bytesToBigInt(bytes: readonly number[]): bigint {
  let value = 0n;
  for (const byte of bytes) value = (value << 8n) | BigInt(byte);
  return value;
}

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
  const first = bytesToBigInt(network.toByteArray());
  const hostBits = BigInt(maxPrefix - prefixLength);
  return {
    family: ip.family,
    text: `${networkText}/${prefixLength}`,
    network,
    prefixLength,
    hadHostBits: networkText !== ip.text,
    first,
    last: first + (1n << hostBits) - 1n,
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

/**
 * The union of several `cidr minus except` blocks as sorted, disjoint address intervals per family, so that whether
 * an address is inside any of thousands of blocks costs one binary search instead of a test per block.
 */
export class AddressRanges {
  readonly #starts: Record<IpFamily, bigint[]> = { ipv4: [], ipv6: [] };
  readonly #ends: Record<IpFamily, bigint[]> = { ipv4: [], ipv6: [] };

  constructor(blocks: Iterable<{ readonly cidr: ParsedCidr; readonly except: readonly ParsedCidr[] }>) {
    const intervals: Record<IpFamily, [bigint, bigint][]> = { ipv4: [], ipv6: [] };
    for (const { cidr, except } of blocks) intervals[cidr.family].push(...subtract(cidr, except));
    for (const family of ['ipv4', 'ipv6'] as const) {
      for (const [start, end] of merge(intervals[family])) {
        this.#starts[family].push(start);
        this.#ends[family].push(end);
      }
    }
  }

  get empty(): boolean {
    return this.#starts.ipv4.length === 0 && this.#starts.ipv6.length === 0;
  }

  contains(ip: ParsedIp): boolean {
    const starts = this.#starts[ip.family];
    let low = 0;
    let high = starts.length - 1;
    // The last interval starting at or below the address is the only one that can hold it.
    while (low <= high) {
      const middle = (low + high) >> 1;
      if ((starts[middle] as bigint) <= ip.value) low = middle + 1;
      else high = middle - 1;
    }
    return high >= 0 && ip.value <= (this.#ends[ip.family][high] as bigint);
  }
}

function subtract(cidr: ParsedCidr, except: readonly ParsedCidr[]): [bigint, bigint][] {
  const holes = merge(except.filter((hole) => hole.family === cidr.family).map((hole) => [hole.first, hole.last]));
  const result: [bigint, bigint][] = [];
  let next = cidr.first;
  for (const [start, end] of holes) {
    if (end < next) continue;
    if (start > cidr.last) break;
    if (start > next) result.push([next, start - 1n]);
    next = end + 1n;
  }
  if (next <= cidr.last) result.push([next, cidr.last]);
  return result;
}

/** Sorts intervals and joins the overlapping and adjacent ones. */
function merge(intervals: [bigint, bigint][]): [bigint, bigint][] {
  const sorted = [...intervals].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const merged: [bigint, bigint][] = [];
  for (const [start, end] of sorted) {
    const last = merged[merged.length - 1];
    if (last && start <= last[1] + 1n) {
      if (end > last[1]) last[1] = end;
    } else merged.push([start, end]);
  }
  return merged;
}
