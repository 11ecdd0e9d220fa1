import { describe, expect, it } from 'vitest';
import { inCidrs, parseCidrs } from './cidrs.js';

describe('parseCidrs, inCidrs', () => {
  it('match an address against CIDRs of its family; an IPv4-mapped IPv6 address as IPv4', () => {
    const cidrs = parseCidrs(['10.96.0.0/12', 'fd00::/64']);
    expect(inCidrs('10.100.1.2', cidrs)).toBe(true);
    expect(inCidrs('10.112.0.1', cidrs)).toBe(false);
    expect(inCidrs('fd00::9', cidrs)).toBe(true);
    expect(inCidrs('::ffff:10.96.0.1', cidrs)).toBe(true);
    expect(inCidrs('10.96.0.1', [])).toBe(false);
  });

  it('place no strictly unreadable text in any CIDR (ipaddr.js reads 010.96.0.1 as 8.96.0.1, ::10.96.0.1 as IPv4)', () => {
    const cidrs = parseCidrs(['8.0.0.0/8', '10.96.0.0/12', 'fd00::/64']);
    expect(inCidrs('010.96.0.1', cidrs)).toBe(false);
    expect(inCidrs('::10.96.0.1', cidrs)).toBe(false);
    expect(inCidrs('fd00::1%eth0', cidrs)).toBe(false);
  });

  it('refuse a CIDR that does not parse (ranges come validated)', () => {
    expect(() => parseCidrs(['10.0.0.0/40'])).toThrow();
  });
});
