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

  /** Throws InvalidRangeError naming the first bad range. */
  constructor(ranges: readonly string[]) {
    for (const text of ranges) {
      const range = parseRange(text);
      this.#ranges[range.family].push(range);
    }
    for (const family of ['IPv4', 'IPv6'] as const) {
      const sorted = [...this.#ranges[family]].sort((a, b) => (a.first < b.first ? -1 : 1));
      for (let i = 1; i < sorted.length; i++) {
        if (sorted[i]!.first <= sorted[i - 1]!.last) {
          throw new InvalidRangeError(sorted[i]!.text, `overlaps ${sorted[i - 1]!.text}`);
        }
      }
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

/** The canonical text of an address (`2001:db8::1`, never `2001:0db8:0:0::1`), or undefined if it is not one. */
export function canonical(address: string): string | undefined {
  const parsed = parseAddress(address);
  return parsed && toText(parsed.family, parsed.value);
}

export function familyOf(address: string): Family | undefined {
  return parseAddress(address)?.family;
}

function parseAddress(text: string): { family: Family; value: bigint } | undefined {
  // isValid alone accepts legacy IPv4 forms such as `10.1.2`, which no Kubernetes field means.
  if (!ipaddr.IPv6.isValid(text) && !ipaddr.IPv4.isValidFourPartDecimal(text)) return undefined;
  let address = ipaddr.parse(text);
  if (address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress()) {
    address = (address as ipaddr.IPv6).toIPv4Address();
  }
  const family: Family = address.kind() === 'ipv4' ? 'IPv4' : 'IPv6';
  return { family, value: bytesToBigInt(address.toByteArray()) };
}

function parseRange(text: string): Range {
  const trimmed = text.trim();
  if (trimmed.includes('-')) {
    const [startText = '', endText = ''] = trimmed.split('-').map((s) => s.trim());
    const start = parseAddress(startText);
    const end = parseAddress(endText);
    if (!start || !end) throw new InvalidRangeError(text, 'expected <first>-<last> with two addresses');
    if (start.family !== end.family) throw new InvalidRangeError(text, 'both ends must be of one family');
    if (end.value < start.value) throw new InvalidRangeError(text, 'the last address comes before the first');
    return { family: start.family, first: start.value, last: end.value, text };
  }
  if (!ipaddr.isValidCIDR(trimmed)) throw new InvalidRangeError(text, 'not a CIDR such as 10.0.0.0/24');
  const [network, prefix] = ipaddr.parseCIDR(trimmed);
  const family: Family = network.kind() === 'ipv4' ? 'IPv4' : 'IPv6';
  const bits = family === 'IPv4' ? 32 : 128;
  const hostBits = BigInt(bits - prefix);
  const value = bytesToBigInt(network.toByteArray());
  const first = (value >> hostBits) << hostBits;
  if (first !== value) throw new InvalidRangeError(text, `host bits set; did you mean ${toText(family, first)}/${prefix}?`);
  return { family, first, last: first + (1n << hostBits) - 1n, text };
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
