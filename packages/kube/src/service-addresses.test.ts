import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { cidrOption, serviceAddressValidator, strictServiceAddressOptionFields, strictServiceAddressRanges } from './service-addresses.js';

describe('serviceAddressValidator (--strict-external-ip-validation)', () => {
  const validate = serviceAddressValidator({
    externalIpRanges: ['192.0.2.0/24', '2001:db8:e::/64'],
    loadBalancerIpRanges: ['198.51.100.0/24'],
    clusterIpRanges: ['10.96.0.0/12', '192.0.2.128/25'],
  });

  it('accepts an address of its kind\'s range, IPv4 and IPv6 (an IPv4-mapped IPv6 address as IPv4)', () => {
    expect(validate('externalip', '192.0.2.10')).toBeUndefined();
    expect(validate('externalip', '2001:db8:e::5')).toBeUndefined();
    expect(validate('externalip', '::ffff:192.0.2.10')).toBeUndefined();
    expect(validate('loadbalancerip', '198.51.100.7')).toBeUndefined();
  });

  it('refuses an address outside its kind\'s range, in the cluster range, or not an address, saying why', () => {
    expect(validate('externalip', '198.51.100.7')).toBe('it is not within --service-external-ip-range');
    expect(validate('loadbalancerip', '192.0.2.10')).toBe('it is not within --loadbalancer-ip-range');
    expect(validate('externalip', '192.0.2.200')).toBe('it lies in --service-cluster-ip-range');
    expect(validate('externalip', '2001:db8:f::5')).toBe('it is not within --service-external-ip-range');
    expect(validate('externalip', 'example.com')).toBe('it is not an IP address');
  });

  it('refuses the spellings ipaddr.js reads as other addresses: octal parts, short forms, zones', () => {
    // ipaddr.js reads 0300.0.02.012 as 192.0.2.10 and 3221226010 as 192.0.2.26, both inside the range.
    for (const text of ['0300.0.02.012', '192.0.2.012', '3221226010', '192.0.522', '2001:db8:e::5%eth0']) {
      expect(validate('externalip', text), text).toBe('it is not an IP address');
    }
    // ::192.0.2.10 is the IPv6 address ::c000:20a (as Go reads it), not 192.0.2.10.
    expect(validate('externalip', '::192.0.2.10')).toBe('it is not within --service-external-ip-range');
  });

  it('refuses every address of a kind that has no range (default deny)', () => {
    const noRanges = serviceAddressValidator({ externalIpRanges: [], loadBalancerIpRanges: [], clusterIpRanges: [] });
    expect(noRanges('externalip', '192.0.2.10')).toBe('no --service-external-ip-range is configured (strict validation denies every externalip)');
    expect(noRanges('loadbalancerip', '198.51.100.7')).toMatch(/^no --loadbalancer-ip-range is configured/);
  });
});

describe('strictServiceAddressOptionFields and strictServiceAddressRanges', () => {
  const schema = z.strictObject({ ...strictServiceAddressOptionFields });

  it('defaults to every address allowed, and hands the ranges to the validator only when strict validation is on', () => {
    const defaults = schema.parse({});
    expect(defaults).toEqual({ strictExternalIpValidation: false, serviceExternalIpRanges: [], loadBalancerIpRanges: [], serviceClusterIpRanges: [] });
    expect(strictServiceAddressRanges(defaults)).toBeUndefined();
    const strict = schema.parse({ strictExternalIpValidation: true, serviceExternalIpRanges: ['192.0.2.0/24'], serviceClusterIpRanges: ['10.96.0.0/12'] });
    expect(strictServiceAddressRanges(strict)).toEqual({ externalIpRanges: ['192.0.2.0/24'], loadBalancerIpRanges: [], clusterIpRanges: ['10.96.0.0/12'] });
  });

  it('refuses CIDRs that Go refuses as options: 010.96.0.0/12 (ipaddr.js: 8.96.0.0/12), a zone, /012', () => {
    for (const text of ['010.96.0.0/12', 'fd00::%eth0/108', '10.96.0.0/012']) expect(cidrOption.safeParse(text).success, text).toBe(false);
    expect(cidrOption.safeParse('10.96.0.0/12').success).toBe(true);
  });

  it('refuses a range that is not a CIDR, naming the field', () => {
    const result = schema.safeParse({ loadBalancerIpRanges: ['198.51.100.0/24', '999.0.0.0/8'] });
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.path).toEqual(['loadBalancerIpRanges', 1]);
    expect(result.error?.issues[0]?.message).toMatch(/must be a CIDR/);
  });
});
