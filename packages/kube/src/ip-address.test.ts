import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isIp, parseCidr, parseIp } from './ip-address.js';

describe('parseIp', () => {
  it.each([
    ['10.0.0.1', 'ipv4', '10.0.0.1'],
    ['0.0.0.0', 'ipv4', '0.0.0.0'],
    ['2001:0db8:0:0::1', 'ipv6', '2001:db8::1'],
    ['::ffff:10.0.0.1', 'ipv4', '10.0.0.1'],
    // Go: net.ParseIP("::1.2.3.4") is the IPv6 address ::102:304 (ipaddr.js alone reads ::ffff:1.2.3.4).
    ['::1.2.3.4', 'ipv6', '::102:304'],
    ['64:ff9b::192.0.2.1', 'ipv6', '64:ff9b::c000:201'],
  ])('reads %s as %s %s', (text, family, canonical) => {
    expect(parseIp(text)).toMatchObject({ family, text: canonical });
  });

  it.each([
    '010.0.0.1', // octal to ipaddr.js (8.0.0.1); Go refuses a leading zero
    '10.1',
    '0x7f.0.0.1',
    '1.2.3.4.5',
    '256.0.0.1',
    'fe80::1%eth0', // a zone: no route, ipset or IPVS service takes one
    '::01.2.3.4',
    '1::2::3',
    ' 10.0.0.1',
    '',
    'toString',
  ])('refuses %j', (text) => {
    expect(parseIp(text)).toBeUndefined();
    expect(isIp(text)).toBe(false);
  });

  it('refuses what is not a string', () => {
    expect(parseIp(42 as unknown as string)).toBeUndefined();
  });

  it('reads every dotted quad as itself and every IPv6 address as its canonical text', () => {
    fc.assert(
      fc.property(fc.ipV4(), (text) => {
        expect(parseIp(text)).toMatchObject({ family: 'ipv4', text });
      }),
    );
    fc.assert(
      fc.property(fc.ipV6(), (text) => {
        const parsed = parseIp(text);
        expect(parsed).toBeDefined();
        // Canonical text reads back as itself: one spelling per address.
        expect(parseIp(parsed!.text)?.text).toBe(parsed!.text);
      }),
    );
  });

  it('never reads an IPv4 address with a leading zero in any part', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 4, maxLength: 4 }), fc.nat(3), (parts, padded) => {
        const text = parts.map((p, i) => (i === padded ? `0${p}` : String(p))).join('.');
        expect(parseIp(text)).toBeUndefined();
      }),
    );
  });
});

describe('parseCidr', () => {
  it('reads a CIDR as net.ParseCIDR does', () => {
    expect(parseCidr('10.244.0.0/24')).toMatchObject({ family: 'ipv4', prefixLength: 24 });
    expect(parseCidr('fd00:10:244::/64')).toMatchObject({ family: 'ipv6', prefixLength: 64 });
    expect(parseCidr('::1.2.3.0/120')?.address.toString()).toBe('::102:300');
    expect(parseCidr('0.0.0.0/0')).toMatchObject({ family: 'ipv4', prefixLength: 0 });
  });

  it('keeps the address as written and gives its network, as net.ParseCIDR gives both', () => {
    const cidr = parseCidr('10.1.2.3/16');
    expect([cidr?.address.toString(), cidr?.network.toString()]).toEqual(['10.1.2.3', '10.1.0.0']);
    expect(parseCidr('fd00:1:2::5/32')?.network.toString()).toBe('fd00:1::');
  });

  it.each(['010.244.0.0/24', '10.244.0.0/024', '10.244.0.0/33', 'fd00::/129', 'fd00::%eth0/64', '::ffff:10.0.0.0/104', '10.244.0.0', '10.244/16', '10.0.0.0/8/8', '/8', ''])(
    'refuses %j',
    (text) => {
      expect(parseCidr(text)).toBeUndefined();
    },
  );
});
