import ipaddr from 'ipaddr.js';

export type IpFamily = 4 | 6;

export interface PodCidr {
  readonly cidr: string;
  readonly family: IpFamily;
  readonly network: bigint;
  readonly prefixLength: number;
}

export function parsePodCidr(cidr: string): PodCidr {
  let parsed: [ipaddr.IPv4 | ipaddr.IPv6, number];
  try {
    parsed = ipaddr.parseCIDR(cidr);
  } catch {
    throw new Error(`pod CIDR "${cidr}" is not a CIDR`);
  }
  const [address, prefixLength] = parsed;
  const family: IpFamily = address.kind() === 'ipv4' ? 4 : 6;
  const bits = family === 4 ? 32 : 128;
  const hostBits = BigInt(bits - prefixLength);
  const network = (toBigInt(address) >> hostBits) << hostBits;
  return { cidr: `${fromBigInt(network, family)}/${prefixLength}`, family, network, prefixLength };
}

/** The CIDRs of a node: at most one per family, as `spec.podCIDRs` requires. */
export function parsePodCidrs(cidrs: readonly string[]): PodCidr[] {
  if (cidrs.length === 0) throw new Error('a lab node needs at least one pod CIDR');
  const parsed = cidrs.map(parsePodCidr);
  for (const family of [4, 6] as const) {
    if (parsed.filter((cidr) => cidr.family === family).length > 1) {
      throw new Error(`pod CIDRs ${cidrs.join(', ')} hold more than one IPv${family} CIDR`);
    }
  }
  return parsed;
}

/** The first host address of a CIDR: where a bridge CNI would put the node's gateway. */
export function firstHostAddress(cidr: PodCidr): string {
  return fromBigInt(cidr.network + 1n, cidr.family);
}

/** The address `offset` places after the network address of a CIDR; throws when it falls outside. */
export function hostAddress(cidr: PodCidr, offset: number): string {
  const size = 1n << BigInt((cidr.family === 4 ? 32 : 128) - cidr.prefixLength);
  if (offset < 1 || BigInt(offset) >= size) throw new Error(`${cidr.cidr} has no host address at offset ${offset}`);
  return fromBigInt(cidr.network + BigInt(offset), cidr.family);
}

export function ipFamily(address: string): IpFamily | undefined {
  if (!ipaddr.isValid(address)) return undefined;
  return ipaddr.parse(address).kind() === 'ipv4' ? 4 : 6;
}

/** Hands out the addresses of one pod CIDR in order, skipping the reserved ones and reusing released ones. */
export class IpAllocator {
  private readonly used = new Set<bigint>();
  private readonly size: bigint;

  constructor(
    readonly cidr: PodCidr,
    reserved: readonly string[] = [],
  ) {
    const bits = cidr.family === 4 ? 32 : 128;
    this.size = 1n << BigInt(bits - cidr.prefixLength);
    for (const address of reserved) {
      const offset = this.offsetOf(address);
      if (offset !== undefined) this.used.add(offset);
    }
  }

  allocate(): string {
    // The network address (and the IPv4 broadcast address) never go to a pod.
    const last = this.cidr.family === 4 ? this.size - 2n : this.size - 1n;
    for (let offset = 1n; offset <= last; offset += 1n) {
      if (!this.used.has(offset)) {
        this.used.add(offset);
        return fromBigInt(this.cidr.network + offset, this.cidr.family);
      }
    }
    throw new Error(`pod CIDR ${this.cidr.cidr} has no free address left`);
  }

  release(address: string): void {
    const offset = this.offsetOf(address);
    if (offset !== undefined) this.used.delete(offset);
  }

  private offsetOf(address: string): bigint | undefined {
    if (ipFamily(address) !== this.cidr.family) return undefined;
    const offset = toBigInt(ipaddr.parse(address)) - this.cidr.network;
    return offset >= 0n && offset < this.size ? offset : undefined;
  }
}

function toBigInt(address: ipaddr.IPv4 | ipaddr.IPv6): bigint {
  return address.toByteArray().reduce((value, byte) => (value << 8n) | BigInt(byte), 0n);
}

function fromBigInt(value: bigint, family: IpFamily): string {
  const length = family === 4 ? 4 : 16;
  const bytes: number[] = [];
  for (let index = 0; index < length; index += 1) {
    bytes.unshift(Number(value & 0xffn));
    value >>= 8n;
  }
  return ipaddr.fromByteArray(bytes).toString();
}
