import { parseIp } from '@kube-router/kube';
import ipaddr from 'ipaddr.js';

export type Family = 'IPv4' | 'IPv6';

/** One contiguous range of addresses, as BigInts so that IPv6 ranges of any size cost nothing to hold. */
interface Range {
  family: Family;
  first: bigint;
  last: bigint;
  text: string;
}

export class InvalidRangeError extends Error {
  constructor(range: string, why: string) {
    super(`invalid --loadbalancer-ip-range ${JSON.stringify(range)}: ${why}`);
    this.name = 'InvalidRangeError';
  }
}

/**
 * The addresses LoadBalancer Services may receive, from kube-router's --loadbalancer-ip-range values: CIDRs
 * (`10.0.0.0/24`, `2001:db8::/120`) or, as an extension, inclusive ranges (`10.0.0.10-10.0.0.20`).
 *
 * Allocation walks each family from a cursor that moves on past every address it hands out, so a released address is
 * reused only after the rest of the pool, and a walk over 10,000 Services stays linear.
 */
export class AddressPool {
  readonly #ranges: Record<Family, Range[]> = { IPv4: [], IPv6: [] };
  readonly #cursor: Record<Family, { range: number; next: bigint }> = {
    IPv4: { range: 0, next: 0n },
    IPv6: { range: 0, next: 0n },
  };

  /** Throws InvalidRangeError naming the first bad range (validateLoadBalancerIPRanges lists them all). */
  constructor(ranges: readonly string[]) {
    const { parsed, errors } = parseRanges(ranges);
    if (errors[0]) throw errors[0];
    for (const range of parsed) this.#ranges[range.family].push(range);
    for (const family of ['IPv4', 'IPv6'] as const) {
      this.#cursor[family] = { range: 0, next: this.#ranges[family][0]?.first ?? 0n };
    }
  }

  has(family: Family): boolean {
    return this.#ranges[family].length > 0;
  }

  size(family: Family): bigint {
    return this.#ranges[family].reduce((n, r) => n + (r.last - r.first + 1n), 0n);
  }

  /** Whether an address (any textual form) lies in one of the ranges. */
  contains(address: string): boolean {
    const parsed = parseAddress(address);
    return parsed !== undefined && this.#ranges[parsed.family].some((r) => parsed.value >= r.first && parsed.value <= r.last);
  }

  /**
   * The next address of the family that `isUsed` does not claim, or undefined when every address is in use.
   * Addresses are compared in canonical form (see canonical()).
   */
  allocate(family: Family, isUsed: (canonicalAddress: string) => boolean): string | undefined {
    const ranges = this.#ranges[family];
    if (ranges.length === 0) return undefined;
    const cursor = this.#cursor[family];
    const total = this.size(family);
    for (let tried = 0n; tried < total; tried++) {
      const candidate = toText(family, cursor.next);
      this.#advance(family);
      if (!isUsed(candidate)) return candidate;
    }
    return undefined;
  }

  #advance(family: Family): void {
    const ranges = this.#ranges[family];
    const cursor = this.#cursor[family];
    if (cursor.next < ranges[cursor.range]!.last) {
      cursor.next++;
      return;
    }
    cursor.range = (cursor.range + 1) % ranges.length;
    cursor.next = ranges[cursor.range]!.first;
  }
}

/**
 * Every problem of a --loadbalancer-ip-range list at once, each naming the flag and the range, for refusing a bad
 * list at start; empty when AddressPool accepts the list.
 */
export function validateLoadBalancerIPRanges(ranges: readonly string[]): string[] {
  return parseRanges(ranges).errors.map((error) => error.message);
}

function parseRanges(ranges: readonly string[]): { parsed: Range[]; errors: InvalidRangeError[] } {
  const parsed: Range[] = [];
  const errors: InvalidRangeError[] = [];
  for (const text of ranges) {
    try {
      parsed.push(parseRange(text));
    } catch (error) {
      errors.push(error instanceof InvalidRangeError ? error : new InvalidRangeError(String(text), String(error)));
    }
  }
  for (const family of ['IPv4', 'IPv6'] as const) {
    const sorted = parsed.filter((r) => r.family === family).sort((a, b) => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0));
    for (let i = 1; i < sorted.length; i++) {
      const [previous, range] = [sorted[i - 1]!, sorted[i]!];
      if (range.first <= previous.last) errors.push(new InvalidRangeError(range.text, `overlaps ${previous.text}`));
    }
  }
  return { parsed, errors };
}

/** The canonical text of an address (`2001:db8::1`, never `2001:0db8:0:0::1`), or undefined if it is not one. */
export function canonical(address: string): string | undefined {
  const parsed = parseAddress(address);
  return parsed && toText(parsed.family, parsed.value);
}

export function familyOf(address: string): Family | undefined {
  return parseAddress(address)?.family;
}

/**
 * kube's parseIp: no legacy IPv4 forms such as `10.1.2` or `010.0.0.1`, no zone, and `::1.2.3.4` as the IPv6 address
 * it is (ipaddr.js alone made it the IPv4 address 1.2.3.4, which a Service asking for the former was then given).
 */
function parseAddress(text: string): { family: Family; value: bigint } | undefined {
  const parsed = parseIp(text);
  return parsed && { family: parsed.family === 'ipv4' ? 'IPv4' : 'IPv6', value: bytesToBigInt(parsed.address.toByteArray()) };
}

/** ::ffff:0:0/96: IPv4 addresses written as IPv6, which canonical() turns back into IPv4. */
const IPV4_MAPPED_FIRST = 0xffff_0000_0000n;
const IPV4_MAPPED_LAST = 0xffff_ffff_ffffn;
const CIDR = /^([^/]+)\/(0|[1-9][0-9]{0,2})$/;

function parseRange(text: string): Range {
  if (typeof text !== 'string') throw new InvalidRangeError(String(text), 'expected a string');
  const trimmed = text.trim();
  let range: Range;
  if (trimmed.includes('-')) {
    const parts = trimmed.split('-').map((s) => s.trim());
    const start = parts.length === 2 ? parseExactAddress(parts[0]!) : undefined;
    const end = parts.length === 2 ? parseExactAddress(parts[1]!) : undefined;
    if (!start || !end) throw new InvalidRangeError(text, 'expected <first>-<last> with two addresses');
    if (start.family !== end.family) throw new InvalidRangeError(text, 'both ends must be of one family');
    if (end.value < start.value) throw new InvalidRangeError(text, 'the last address comes before the first');
    range = { family: start.family, first: start.value, last: end.value, text };
  } else {
    const match = CIDR.exec(trimmed);
    const address = match ? parseExactAddress(match[1]!) : undefined;
    const bits = address?.family === 'IPv4' ? 32 : 128;
    const prefix = Number(match?.[2]);
    // A prefix length is plain decimal: `/08` is refused as Go's net.ParseCIDR refuses it.
    if (!address || !(prefix <= bits)) throw new InvalidRangeError(text, 'not a CIDR such as 10.0.0.0/24');
    const hostBits = BigInt(bits - prefix);
    const first = (address.value >> hostBits) << hostBits;
    if (first !== address.value) {
      throw new InvalidRangeError(text, `host bits set; did you mean ${toText(address.family, first)}/${prefix}?`);
    }
    range = { family: address.family, first, last: first + (1n << hostBits) - 1n, text };
  }
  if (range.family === 'IPv6' && range.first <= IPV4_MAPPED_LAST && range.last >= IPV4_MAPPED_FIRST) {
    // Its addresses read back as IPv4 ones, so the pool could neither tell them in use nor keep the families apart.
    throw new InvalidRangeError(text, 'covers IPv4-mapped IPv6 addresses (::ffff:0:0/96); use an IPv4 range instead');
  }
  // The unspecified address (0.0.0.0, ::) means "no address" to every consumer of a Service's status.
  if (range.first === 0n) range = { ...range, first: 1n };
  if (range.first > range.last) throw new InvalidRangeError(text, 'holds only the unspecified address');
  return range;
}

/** An address as written, without mapping IPv4-mapped IPv6 to IPv4 (a range must say which family it is). */
function parseExactAddress(text: string): { family: Family; value: bigint } | undefined {
  const parsed = parseAddress(text);
  // parseIp reads ::ffff:a.b.c.d as IPv4; written with a colon it is the IPv6 address that maps it.
  if (parsed?.family === 'IPv4' && text.includes(':')) return { family: 'IPv6', value: IPV4_MAPPED_FIRST + parsed.value };
  return parsed;
}

function bytesToBigInt(bytes: number[]): bigint {
  return bytes.reduce((n, byte) => (n << 8n) | BigInt(byte), 0n);
}

function toText(family: Family, value: bigint): string {
  const length = family === 'IPv4' ? 4 : 16;
  const bytes: number[] = [];
  for (let i = length - 1; i >= 0; i--) bytes[i] = Number((value >> BigInt((length - 1 - i) * 8)) & 0xffn);
  return ipaddr.fromByteArray(bytes).toString();
}
