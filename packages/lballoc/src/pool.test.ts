import { describe, expect, it } from 'vitest';
import { AddressPool, canonical, familyOf, InvalidRangeError, validateLoadBalancerIPRanges } from './pool.js';

const none = () => false;

describe('AddressPool', () => {
  it('hands out every address of several ranges in order, then wraps around past used ones', () => {
    const pool = new AddressPool(['10.0.0.0/31', '10.0.1.5-10.0.1.6']);
    const used = new Set<string>();
    const take = () => {
      const ip = pool.allocate('IPv4', (c) => used.has(c));
      if (ip) used.add(ip);
      return ip;
    };
    expect([take(), take(), take(), take(), take()]).toEqual(['10.0.0.0', '10.0.0.1', '10.0.1.5', '10.0.1.6', undefined]);
    used.delete('10.0.0.1');
    expect(take()).toBe('10.0.0.1');
  });

  it('allocates IPv6 from large prefixes without enumerating them', () => {
    const pool = new AddressPool(['2001:db8::/64']);
    expect(pool.size('IPv6')).toBe(2n ** 64n);
    expect(pool.allocate('IPv6', none)).toBe('2001:db8::');
    expect(pool.allocate('IPv6', (c) => c === '2001:db8::1')).toBe('2001:db8::2');
    expect(pool.has('IPv4')).toBe(false);
    expect(pool.allocate('IPv4', none)).toBeUndefined();
  });

  it('answers containment for any textual form of an address', () => {
    const pool = new AddressPool(['192.0.2.0/24', '2001:db8:1::/120']);
    expect(pool.contains('192.0.2.77')).toBe(true);
    expect(pool.contains('::ffff:192.0.2.77')).toBe(true);
    expect(pool.contains('2001:0db8:0001:0000::00ff')).toBe(true);
    expect(pool.contains('2001:db8:1::100')).toBe(false);
    expect(pool.contains('not-an-ip')).toBe(false);
  });

  it.each([
    ['10.0.0.1/24', /host bits set; did you mean 10\.0\.0\.0\/24/],
    ['10.0.0.0/33', /not a CIDR/],
    ['banana', /not a CIDR/],
    ['10.0.0.9-10.0.0.1', /last address comes before the first/],
    ['10.0.0.1-2001:db8::1', /one family/],
    ['10.0.0.1-10.0.0.5-garbage', /expected <first>-<last> with two addresses/],
    ['10.0.0.0/08', /not a CIDR/],
    ['10.0.0.0/', /not a CIDR/],
    ['010.0.0.0/8', /not a CIDR/],
    ['fe80::/64%eth0', /not a CIDR/],
    ['::ffff:10.0.0.0/126', /IPv4-mapped/],
    ['::ffff:10.0.0.1-::ffff:10.0.0.9', /IPv4-mapped/],
    ['::/0', /IPv4-mapped/],
    ['::/80', /IPv4-mapped/],
    ['::fffe:ffff:ffff-::1:0:0:0', /IPv4-mapped/],
    ['::/128', /only the unspecified address/],
  ])('rejects %s with a clear error', (range, message) => {
    expect(() => new AddressPool([range])).toThrow(InvalidRangeError);
    expect(() => new AddressPool([range])).toThrow(message);
  });

  it('rejects overlapping ranges', () => {
    expect(() => new AddressPool(['10.0.0.0/24', '10.0.0.128/25'])).toThrow(/overlaps 10\.0\.0\.0\/24/);
  });

  it('canonicalises addresses', () => {
    expect(canonical('2001:0DB8::0001')).toBe('2001:db8::1');
    expect(canonical('::ffff:10.1.2.3')).toBe('10.1.2.3');
    expect(canonical('10.1.2')).toBeUndefined();
  });

  it('reads a requested address as Go does: ::1.2.3.4 is IPv6 (ipaddr.js made it 1.2.3.4), octal and zones are none', () => {
    expect(canonical('::1.2.3.4')).toBe('::102:304');
    expect(familyOf('::1.2.3.4')).toBe('IPv6');
    const pool = new AddressPool(['1.2.3.0/24', '::100:0/104']);
    expect(pool.contains('::1.2.3.4')).toBe(true);
    expect(pool.contains('1.2.3.4')).toBe(true);
    for (const text of ['010.0.0.1', '1.2.3.04', '::1.2.3.4%eth0']) expect(canonical(text), text).toBeUndefined();
  });

  it('never hands out the unspecified address', () => {
    expect(new AddressPool(['::/126']).allocate('IPv6', none)).toBe('::1');
    const v4 = new AddressPool(['0.0.0.0/31']);
    expect(v4.size('IPv4')).toBe(1n);
    expect(v4.allocate('IPv4', none)).toBe('0.0.0.1');
  });

  it('lists every problem of a range list at once, each naming the flag', () => {
    expect(validateLoadBalancerIPRanges(['10.0.0.0/24', '2001:db8::/120'])).toEqual([]);
    expect(validateLoadBalancerIPRanges(['10.0.0.0/08', 'banana', '10.1.0.0/24', '10.1.0.128/25', '::ffff:10.0.0.0/126'])).toEqual([
      'invalid --loadbalancer-ip-range "10.0.0.0/08": not a CIDR such as 10.0.0.0/24',
      'invalid --loadbalancer-ip-range "banana": not a CIDR such as 10.0.0.0/24',
      'invalid --loadbalancer-ip-range "::ffff:10.0.0.0/126": covers IPv4-mapped IPv6 addresses (::ffff:0:0/96); use an IPv4 range instead',
      'invalid --loadbalancer-ip-range "10.1.0.128/25": overlaps 10.1.0.0/24',
    ]);
  });
});
