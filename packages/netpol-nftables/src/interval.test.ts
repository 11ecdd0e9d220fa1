import { describe, expect, it } from 'vitest';
import { canonicalIntervals, ipBlockElements } from './interval.js';

describe('ipBlockElements', () => {
  it('subtracts each block its own excepts and merges the rest into disjoint ranges', () => {
    expect(ipBlockElements([{ cidr: '10.0.0.0/24', except: ['10.0.0.5/32'] }], 'ipv4')).toEqual([
      '10.0.0.0-10.0.0.4',
      '10.0.0.6-10.0.0.255',
    ]);
    // One block's except does not shadow another block that covers the address.
    expect(
      ipBlockElements(
        [
          { cidr: '10.0.0.0/24', except: ['10.0.0.0/25'] },
          { cidr: '10.0.0.0/26', except: [] },
        ],
        'ipv4',
      ),
    ).toEqual(['10.0.0.0-10.0.0.63', '10.0.0.128-10.0.0.255']);
    expect(ipBlockElements([{ cidr: '0.0.0.0/0', except: [] }], 'ipv4')).toEqual(['0.0.0.0-255.255.255.255']);
  });

  it('works on IPv6', () => {
    expect(ipBlockElements([{ cidr: 'fd00::/64', except: ['fd00::2/128'] }], 'ipv6')).toEqual([
      'fd00::-fd00::1',
      'fd00::3-fd00::ffff:ffff:ffff:ffff',
    ]);
  });
});

describe('canonicalIntervals', () => {
  it('compares what nft lists (prefixes, ranges, single addresses) with what was rendered', () => {
    expect(canonicalIntervals(['10.0.1.0/24', '10.0.0.0-10.0.0.4', '10.0.0.5'], 'ipv4')).toEqual(['10.0.0.0-10.0.0.5', '10.0.1.0-10.0.1.255']);
    expect(canonicalIntervals(['10.0.0.0-10.0.0.4', '10.0.0.6-10.0.0.255'], 'ipv4')).toEqual(
      canonicalIntervals(ipBlockElements([{ cidr: '10.0.0.0/24', except: ['10.0.0.5/32'] }], 'ipv4'), 'ipv4'),
    );
  });

  it('keeps the rest of a concatenated element and merges only ranges with the same rest', () => {
    // As `nft -j` lists an `ipv4_addr . inet_proto` interval set.
    expect(canonicalIntervals(['10.0.1.0/24 . 0-255', '10.0.0.0-10.0.0.255 . 0-255', '10.0.2.0/24 . 6'], 'ipv4')).toEqual([
      '10.0.0.0-10.0.1.255 . 0-255',
      '10.0.2.0-10.0.2.255 . 6',
    ]);
  });
});
