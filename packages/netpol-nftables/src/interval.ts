import ipaddr from 'ipaddr.js';
import type { IpBlock, IpFamily } from '@kube-router/netpol';

type Interval = readonly [bigint, bigint];

const BITS: Record<IpFamily, number> = { ipv4: 32, ipv6: 128 };

function toBigInt(address: ipaddr.IPv4 | ipaddr.IPv6): bigint {
  return address.toByteArray().reduce((value, byte) => (value << 8n) | BigInt(byte), 0n);
}

function fromBigInt(value: bigint, family: IpFamily): string {
  const bytes: number[] = [];
  for (let i = 0; i < BITS[family] / 8; i++) {
    bytes.unshift(Number(value & 0xffn));
    value >>= 8n;
  }
  return ipaddr.fromByteArray(bytes).toString();
}

function cidrInterval(cidr: string, family: IpFamily): Interval {
  const [address, length] = ipaddr.parseCIDR(cidr);
  const start = toBigInt(address);
  const hostBits = BigInt(BITS[family] - length);
  const first = (start >> hostBits) << hostBits;
  return [first, first + (1n << hostBits) - 1n];
}

/** Sorts and merges overlapping or adjacent intervals. */
function merge(intervals: readonly Interval[]): Interval[] {
  const sorted = [...intervals].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const out: [bigint, bigint][] = [];
  for (const [start, end] of sorted) {
    const last = out[out.length - 1];
    if (last && start <= last[1] + 1n) {
      if (end > last[1]) last[1] = end;
    } else {
      out.push([start, end]);
    }
  }
  return out;
}

function subtract(from: Interval, holes: readonly Interval[]): Interval[] {
  let pieces: Interval[] = [from];
  for (const [holeStart, holeEnd] of holes) {
    pieces = pieces.flatMap(([start, end]): Interval[] => {
      if (holeEnd < start || holeStart > end) return [[start, end]];
      const left: Interval[] = holeStart > start ? [[start, holeStart - 1n]] : [];
      const right: Interval[] = holeEnd < end ? [[holeEnd + 1n, end]] : [];
      return [...left, ...right];
    });
  }
  return pieces;
}

function intervalText([start, end]: Interval, family: IpFamily): string {
  return start === end ? fromBigInt(start, family) : `${fromBigInt(start, family)}-${fromBigInt(end, family)}`;
}

/**
 * The addresses of a rule's ipBlocks (each CIDR minus its own excepts, then the union) as disjoint ranges: the
 * elements of one interval set, so that a block's excepts never shadow another block and one lookup matches them all.
 */
export function ipBlockElements(blocks: readonly IpBlock[], family: IpFamily): string[] {
  // Policies repeat their ipBlocks (an allow-list of the same ranges in every namespace), and parsing and printing
  // IPv6 ranges through ipaddr.js was a few milliseconds of every first sync: each distinct list is worked out once.
  const key = `${family} ${blocks.map((block) => [block.cidr, ...block.except].join(' ')).join(',')}`;
  let elements = blockElements.get(key);
  if (elements === undefined) {
    const pieces = blocks.flatMap((block) =>
      subtract(
        cidrInterval(block.cidr, family),
        block.except.map((cidr) => cidrInterval(cidr, family)),
      ),
    );
    elements = merge(pieces).map((interval) => intervalText(interval, family));
    if (blockElements.size >= MAX_CACHED_BLOCK_LISTS) blockElements.clear();
    blockElements.set(key, elements);
  }
  return [...elements];
}

const blockElements = new Map<string, readonly string[]>();
/** Bounds the memo: a cluster that keeps making new ipBlocks starts it afresh instead of growing it. */
const MAX_CACHED_BLOCK_LISTS = 4096;

/**
 * Elements of an interval set in one canonical form (merged `a-b` ranges), whatever notation nft lists them in
 * (prefixes, ranges, single addresses), so that a set read back compares equal to the one we rendered. An element of
 * a concatenation (`<address range> . <rest>`) keeps its rest; ranges merge only with ranges of the same rest.
 */
export function canonicalIntervals(elements: readonly string[], family: IpFamily): string[] {
  const byRest = new Map<string, Interval[]>();
  for (const element of elements) {
    const at = element.indexOf(' . ');
    const address = at < 0 ? element : element.slice(0, at);
    const rest = at < 0 ? '' : element.slice(at);
    let intervals = byRest.get(rest);
    if (!intervals) byRest.set(rest, (intervals = []));
    if (address.includes('/')) {
      intervals.push(cidrInterval(address, family));
    } else {
      const [first = '', last = first] = address.split('-');
      intervals.push([toBigInt(ipaddr.parse(first.trim())), toBigInt(ipaddr.parse(last.trim()))]);
    }
  }
  return [...byRest].flatMap(([rest, intervals]) =>
    merge(intervals).map(([start, end]) => `${fromBigInt(start, family)}-${fromBigInt(end, family)}${rest}`),
  );
}
