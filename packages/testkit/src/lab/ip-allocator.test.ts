import { describe, expect, it } from 'vitest';
import { IpAllocator, firstHostAddress, parsePodCidr, parsePodCidrs } from './ip-allocator.js';

describe('pod CIDRs and address allocation', () => {
  it('normalises a CIDR and finds its first host address', () => {
    expect(parsePodCidr('10.244.1.7/24')).toMatchObject({ cidr: '10.244.1.0/24', family: 4, prefixLength: 24 });
    expect(firstHostAddress(parsePodCidr('10.244.1.0/24'))).toBe('10.244.1.1');
    expect(firstHostAddress(parsePodCidr('fd00:10:244:1::/64'))).toBe('fd00:10:244:1::1');
  });

  it('refuses garbage and two CIDRs of one family', () => {
    expect(() => parsePodCidr('10.244.1.0')).toThrow(/not a CIDR/);
    expect(() => parsePodCidrs(['10.0.0.0/24', '10.1.0.0/24'])).toThrow(/more than one IPv4/);
    expect(() => parsePodCidrs([])).toThrow(/at least one/);
  });

  it('hands out addresses in order, skipping reserved ones and the IPv4 network and broadcast addresses', () => {
    const allocator = new IpAllocator(parsePodCidr('10.0.0.0/29'), ['10.0.0.1', '192.168.0.1']);
    const handedOut = Array.from({ length: 5 }, () => allocator.allocate());
    expect(handedOut).toEqual(['10.0.0.2', '10.0.0.3', '10.0.0.4', '10.0.0.5', '10.0.0.6']);
    expect(() => allocator.allocate()).toThrow(/no free address/);
    allocator.release('10.0.0.4');
    expect(allocator.allocate()).toBe('10.0.0.4');
  });

  it('uses the whole IPv6 range but the network address', () => {
    const allocator = new IpAllocator(parsePodCidr('fd00::/126'));
    expect([allocator.allocate(), allocator.allocate(), allocator.allocate()]).toEqual(['fd00::1', 'fd00::2', 'fd00::3']);
    expect(() => allocator.allocate()).toThrow(/no free address/);
  });
});
