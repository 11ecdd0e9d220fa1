import fc from 'fast-check';
import ipaddr from 'ipaddr.js';
import { describe, expect, it } from 'vitest';
import { AddressRanges, cidrContainsIp, cidrStrictlyContains, parseCidr, parseIp } from './cidr.js';

describe('parseIp', () => {
  it.each([
    ['10.0.0.1', { family: 'ipv4', text: '10.0.0.1' }],
    ['FD00:0:0:0::1', { family: 'ipv6', text: 'fd00::1' }],
    ['2001:db8:0:0:1:0:0:1', { family: 'ipv6', text: '2001:db8::1:0:0:1' }],
    ['::ffff:10.0.0.1', { family: 'ipv6', text: '::ffff:a00:1' }],
  ])('reads %s', (text, expected) => {
    expect(parseIp(text)).toMatchObject(expected);
  });

  it.each([
    '10.0.0', '10.0.0.256', '010.0.0.1', '0x0a.0.0.1', 'fe80::1%eth0', 'fd00::g', '', 'web',
    // What a URL host would end at and then ignore, and IPv6 shapes that are not addresses.
    '::1]/x', '[::1]', '::1/64', '::1 ', '1:2:3:4:5:6:7:8:9', '12345::', '::1::', ':::', '1:2:3:4:5:6:7', 'fd00::1.2.3',
  ])(
    'refuses %j',
    (text) => {
      expect(parseIp(text)).toBeUndefined();
    },
  );
});

describe('parseIp on IPv4', () => {
  /** The strict dotted quad, written out the slow way: four decimal octets, no leading zero, none above 255. */
  const reference = (text: string): bigint | undefined => {
    const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
    if (!match) return undefined;
    const octets = match.slice(1).map((octet) => (/^(0|[1-9]\d*)$/.test(octet) ? Number(octet) : 256));
    return octets.some((octet) => octet > 255) ? undefined : octets.reduce((value, octet) => value * 256n + BigInt(octet), 0n);
  };

  it('reads what a strict dotted quad is, with its number, and refuses everything else', () => {
    // Short strings of digits and dots, most of them near a quad: leading zeros, empty, long or large octets.
    const octet = fc.oneof(fc.integer({ min: 0, max: 300 }).map(String), fc.stringMatching(/^[0-9]{0,4}$/));
    const nearQuad = fc.array(octet, { minLength: 3, maxLength: 5 }).map((parts) => parts.join('.'));
    fc.assert(
      fc.property(fc.oneof(nearQuad, fc.stringMatching(/^[0-9.]{0,16}$/)), (text) => {
        const expected = reference(text);
        const parsed = parseIp(text);
        if (expected === undefined) expect(parsed, text).toBeUndefined();
        else expect({ family: parsed?.family, text: parsed?.text, value: parsed?.value }, text).toEqual({ family: 'ipv4', text, value: expected });
      }),
      { numRuns: 3000 },
    );
  });
});

describe('parseIp on IPv6', () => {
  it('agrees with ipaddr.js on every way of writing an address: canonical text and number', () => {
    const group = fc.integer({ min: 0, max: 0xffff });
    // Runs of zero groups are likely, so that `::` compression (and which run it takes) is exercised.
    const groups = fc.array(fc.oneof(group, fc.constant(0), fc.constant(0)), { minLength: 8, maxLength: 8 });
    const written = fc.tuple(groups, fc.boolean(), fc.boolean(), fc.boolean(), fc.nat()).map(([parts, upper, padded, v4Tail, at]) => {
      const hex = parts.map((part) => {
        const text = part.toString(16);
        return padded ? text.padStart(4, '0') : text;
      });
      let text = hex.join(':');
      if (v4Tail) text = `${hex.slice(0, 6).join(':')}:${[parts[6]! >> 8, parts[6]! & 255, parts[7]! >> 8, parts[7]! & 255].join('.')}`;
      else if (parts.includes(0)) {
        // Compress one run of zero groups (any run, not only the longest: every writer may choose).
        const zeros = parts.map((part, index) => (part === 0 ? index : -1)).filter((index) => index >= 0);
        const start = zeros[at % zeros.length]!;
        let end = start;
        while (end + 1 < 8 && parts[end + 1] === 0) end++;
        text = `${hex.slice(0, start).join(':')}::${hex.slice(end + 1).join(':')}`;
      }
      return upper ? text.toUpperCase() : text;
    });
    fc.assert(
      fc.property(written, (text) => {
        const expected = ipaddr.IPv6.parse(text);
        const parsed = parseIp(text);
        expect(parsed?.family, text).toBe('ipv6');
        expect(parsed?.text, text).toBe(expected.toRFC5952String());
        expect(parsed?.value, text).toBe(BigInt(`0x${Buffer.from(expected.toByteArray()).toString('hex')}`));
      }),
      { numRuns: 2000 },
    );
  });
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

describe('AddressRanges', () => {
  const block = (cidr: string, except: string[] = []) => ({ cidr: parseCidr(cidr), except: except.map(parseCidr) });

  it('merges blocks and subtracts their excepts', () => {
    const ranges = new AddressRanges([
      block('10.0.0.0/24', ['10.0.0.128/25']),
      block('10.0.1.0/24'),
      block('10.0.0.0/26'),
      block('fd00::/64', ['fd00::/65']),
    ]);
    const inside = (text: string) => ranges.contains(parseIp(text)!);
    for (const text of ['10.0.0.0', '10.0.0.127', '10.0.1.0', '10.0.1.255', 'fd00::8000:0:0:0']) {
      expect(inside(text), text).toBe(true);
    }
    for (const text of ['9.255.255.255', '10.0.0.128', '10.0.0.255', '10.0.2.0', 'fd00::1', 'fd01::']) {
      expect(inside(text), text).toBe(false);
    }
    expect(new AddressRanges([]).empty).toBe(true);
    expect(new AddressRanges([]).contains(parseIp('10.0.0.1')!)).toBe(false);
  });

  it('agrees with testing each block in turn, for random blocks and addresses', () => {
    const octet = fc.integer({ min: 0, max: 255 });
    const address = fc.tuple(fc.constantFrom(10), fc.constantFrom(0, 1), octet, octet).map((parts) => parts.join('.'));
    const cidr = fc.tuple(address, fc.integer({ min: 8, max: 32 })).map(([ip, prefix]) => parseCidr(`${ip}/${prefix}`));
    const blockArb = fc
      .tuple(cidr, fc.array(fc.tuple(address, fc.integer({ min: 9, max: 32 })), { maxLength: 3 }))
      .map(([outer, holes]) => ({
        cidr: outer,
        except: holes
          .map(([ip, prefix]) => parseCidr(`${ip}/${prefix}`))
          .filter((hole) => cidrStrictlyContains(outer, hole)),
      }));
    fc.assert(
      fc.property(
        fc.array(blockArb, { maxLength: 6 }),
        fc.array(address, { minLength: 1, maxLength: 20 }),
        (blocks, ips) => {
          const ranges = new AddressRanges(blocks);
          for (const text of ips) {
            const ip = parseIp(text)!;
            const expected = blocks.some(
              (b) => cidrContainsIp(b.cidr, ip) && !b.except.some((hole) => cidrContainsIp(hole, ip)),
            );
            expect(ranges.contains(ip), text).toBe(expected);
          }
        },
      ),
    );
  });
});
