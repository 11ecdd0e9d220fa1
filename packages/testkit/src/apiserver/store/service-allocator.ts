import ipaddr from 'ipaddr.js';
import type { IpFamily } from './ip-address.js';

/** kube-apiserver's default --service-node-port-range. */
export const nodePortRange = { first: 30000, last: 32767 } as const;

interface Range {
  family: IpFamily;
  first: bigint;
  size: bigint;
  byteLength: number;
}

function toBigInt(bytes: number[]): bigint {
  return bytes.reduce((value, byte) => (value << 8n) | BigInt(byte), 0n);
}

function fromBigInt(value: bigint, byteLength: number): string {
  const bytes: number[] = [];
  for (let i = 0; i < byteLength; i++) {
    bytes.unshift(Number(value & 0xffn));
    value >>= 8n;
  }
  return ipaddr.fromByteArray(bytes).toString();
}

function parseRange(cidr: string): Range {
  const [address, prefix] = ipaddr.parseCIDR(cidr);
  const byteLength = address.kind() === 'ipv4' ? 4 : 16;
  const hostBits = BigInt(byteLength * 8 - prefix);
  const network = (toBigInt(address.toByteArray()) >> hostBits) << hostBits;
  return { family: address.kind() === 'ipv4' ? 'IPv4' : 'IPv6', first: network, size: 1n << hostBits, byteLength };
}

/** Hands out Service cluster IPs from the service CIDRs and node ports from the node port range, never twice. */
export class ServiceAddressAllocator {
  private readonly ranges: Range[];

  constructor(serviceCidrs: readonly string[]) {
    this.ranges = serviceCidrs.map(parseRange);
  }

  hasFamily(family: IpFamily): boolean {
    return this.ranges.some((range) => range.family === family);
  }

  inRange(address: string): boolean {
    const parsed = ipaddr.parse(address);
    const value = toBigInt(parsed.toByteArray());
    return this.ranges.some(
      (range) =>
        range.family === (parsed.kind() === 'ipv4' ? 'IPv4' : 'IPv6') &&
        value >= range.first &&
        value < range.first + range.size,
    );
  }

  /** The lowest free address of the family, skipping the network address and the first host (the apiserver's). */
  allocateClusterIp(family: IpFamily, used: ReadonlySet<string>): string | undefined {
    const range = this.ranges.find((candidate) => candidate.family === family);
    if (!range) return undefined;
    const limit = range.size > 1_000_000n ? 1_000_000n : range.size - 1n;
    for (let offset = 2n; offset < limit; offset++) {
      const address = fromBigInt(range.first + offset, range.byteLength);
      if (!used.has(address)) return address;
    }
    return undefined;
  }

  allocateNodePort(used: ReadonlySet<number>): number | undefined {
    for (let port = nodePortRange.first; port <= nodePortRange.last; port++) if (!used.has(port)) return port;
    return undefined;
  }
}
