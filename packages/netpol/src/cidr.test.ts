import { describe, expect, it } from 'vitest';
import { cidrContainsIp, cidrStrictlyContains, parseCidr, parseIp } from './cidr.js';

describe('parseIp', () => {
  it.each([
    ['10.0.0.1', { family: 'ipv4', text: '10.0.0.1' }],
    ['FD00:0:0:0::1', { family: 'ipv6', text: 'fd00::1' }],
    ['2001:db8:0:0:1:0:0:1', { family: 'ipv6', text: '2001:db8::1:0:0:1' }],
    ['::ffff:10.0.0.1', { family: 'ipv6', text: '::ffff:a00:1' }],
  ])('reads %s', (text, expected) => {
    expect(parseIp(text)).toMatchObject(expected);
  });

  it.each(['10.0.0', '10.0.0.256', '010.0.0.1', '0x0a.0.0.1', 'fe80::1%eth0', 'fd00::g', '', 'web'])(
    'refuses %j',
    (text) => {
      expect(parseIp(text)).toBeUndefined();
    },
  );
});

describe('parseCidr', () => {
  it.each([
    ['10.0.0.0/8', '10.0.0.0/8', false],
    ['10.1.2.3/8', '10.0.0.0/8', true],
    ['10.1.2.3/32', '10.1.2.3/32', false],
    ['0.0.0.0/0', '0.0.0.0/0', false],
    ['10.255.255.255/9', '10.128.0.0/9', true],
    ['FD00::1/64', 'fd00::/64', true],
    ['2001:db8:abcd:ef01::/60', '2001:db8:abcd:ef00::/60', true],
    ['::/0', '::/0', false],
  ])('normalises %s to %s', (text, normalised, hadHostBits) => {
    expect(parseCidr(text)).toMatchObject({ text: normalised, hadHostBits });
  });

  it.each([
    ['10.0.0.0', /missing \/prefix/],
    ['10.0.0.0/33', /0..32/],
    ['fd00::/129', /0..128/],
    ['10.0.0.0/-1', /prefix length/],
    ['10.0.0.0/8/8', /prefix length/],
    ['x/8', /invalid address/],
  ])('refuses %s', (text, message) => {
    expect(() => parseCidr(text)).toThrow(message);
  });

  it('tells containment, strict for excepts and per family', () => {
    const outer = parseCidr('10.0.0.0/16');
    expect(cidrStrictlyContains(outer, parseCidr('10.0.3.0/24'))).toBe(true);
    expect(cidrStrictlyContains(outer, parseCidr('10.0.0.0/16'))).toBe(false);
    expect(cidrStrictlyContains(outer, parseCidr('10.1.0.0/24'))).toBe(false);
    expect(cidrStrictlyContains(outer, parseCidr('10.0.0.0/8'))).toBe(false);
    expect(cidrStrictlyContains(parseCidr('::/0'), parseCidr('10.0.0.0/8'))).toBe(false);
    expect(cidrContainsIp(outer, parseIp('10.0.255.255')!)).toBe(true);
    expect(cidrContainsIp(outer, parseIp('10.1.0.0')!)).toBe(false);
    expect(cidrContainsIp(parseCidr('::/0'), parseIp('10.0.0.1')!)).toBe(false);
    expect(cidrContainsIp(parseCidr('0.0.0.0/0'), parseIp('255.255.255.255')!)).toBe(true);
  });
});
