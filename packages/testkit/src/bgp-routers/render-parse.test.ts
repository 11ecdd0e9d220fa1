import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExecRunner } from '@kube-router/netfilter';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasTool } from '../lab/preconditions.js';
import { FRR_BGPD } from './frr.js';
import { parseBirdProtocols, parseBirdRoutes, parseFrrNeighbors, parseFrrRoutes, renderBirdConfig, renderFrrConfig, type BgpRouterConfig } from './index.js';

const everything: BgpRouterConfig = {
  netns: 'unused',
  routerId: '10.0.0.1',
  asn: 65001,
  listenPort: 1179,
  gracefulRestartTimeSeconds: 90,
  neighbors: [
    { address: '10.0.0.2', asn: 65002, port: 2179, password: 'pw', multihopTtl: 3, passive: true, gracefulRestart: true, holdTimeSeconds: 9 },
    { address: '10.0.0.3', asn: 65001, routeReflectorClient: true, export: 'all', import: { reject: ['10.96.0.0/12', '0.0.0.0/0'] }, localAddress: '10.0.0.1' },
    { address: 'fd00::2', asn: 65002, import: 'none', export: 'none' },
  ],
  staticRoutes: [
    { prefix: '10.50.0.0/24', communities: ['65001:100'], largeCommunities: ['65001:1:2'] },
    { prefix: 'fd00:50::/64', communities: ['65001:6'] },
  ],
};

const runner = new ExecRunner({ defaultTimeoutMs: 10_000 });
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'blrender-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('renderBirdConfig', () => {
  it('renders every option', () => {
    const text = renderBirdConfig(everything);
    expect(text).toContain('route 10.50.0.0/24 blackhole { bgp_community.add((65001,100)); bgp_large_community.add((65001,1,2)); };');
    expect(text).toContain('local port 1179 as 65001;');
    expect(text).toContain('neighbor 10.0.0.2 port 2179 as 65002;');
    expect(text).toContain('rr client;');
    expect(text).toContain('import where !(net ~ [ 10.96.0.0/12+, 0.0.0.0/0+ ]); export where source ~ [ RTS_STATIC, RTS_BGP ];');
    expect(text).toContain('ipv6 { import none; export none; };');
  });

  it.skipIf(!hasTool('bird'))('renders what BIRD accepts (bird -p)', async () => {
    const file = join(dir, 'bird.conf');
    await writeFile(file, renderBirdConfig(everything));
    await expect(runner.run({ command: 'bird', args: ['-p', '-c', file] })).resolves.toMatchObject({ exitCode: 0 });
  });

  it('rejects what would be a confusing daemon error', () => {
    expect(() => renderBirdConfig({ ...everything, routerId: 'fd00::1', neighbors: [{ address: '10.0.0.300', asn: 0 }] })).toThrow(
      'invalid BGP router config: routerId "fd00::1" must be an IPv4 address; neighbor address "10.0.0.300" is not an IP address; neighbor 10.0.0.300 asn 0 is not an ASN',
    );
    expect(() => renderBirdConfig({ ...everything, staticRoutes: [{ prefix: '10.0.0.0/24', communities: ['no'] }] })).toThrow('community "no"');
  });
});

describe('renderFrrConfig', () => {
  it('renders every option', () => {
    const text = renderFrrConfig(everything);
    expect(text).toContain(' neighbor 10.0.0.2 ebgp-multihop 3\n');
    expect(text).toContain('  neighbor 10.0.0.3 route-reflector-client\n');
    expect(text).toContain('ip prefix-list BL-IMPORT-2-IPV4-REJECT seq 5 permit 10.96.0.0/12 le 32\n');
    expect(text).toContain('  network fd00:50::/64 route-map BL-STATIC-IPV6-1\n');
    expect(text).toContain('route-map BL-STATIC-IPV4-1 permit 10\n set community 65001:100 additive\n set large-community 65001:1:2 additive\n');
  });

  it.skipIf(!hasTool('vtysh'))('renders what bgpd accepts (bgpd --dryrun)', async () => {
    const file = join(dir, 'bgpd.conf');
    await writeFile(file, renderFrrConfig(everything));
    const result = await runner.run({ command: FRR_BGPD, args: ['-C', '-f', file, '-Z', '-S', '-n', '-P', '0', '-p', '0', '--vty_socket', dir] });
    // The dry run exits 0 even for a bad line; it complains on stderr. FRR 8.4 also complains about a per-neighbor
    // `graceful-restart` of a peer that is not up yet, then applies it (`show bgp neighbors json` says localGrMode
    // Restart): that warning is the only one allowed.
    const complaints = result.stderr
      .split('\n')
      .filter((line) => line !== '' && !/Graceful restart configuration changed|^% Invalid value$|Config Failed on config line \d+: +neighbor \S+ graceful-restart$/.test(line));
    expect(complaints).toEqual([]);
  });
});

describe('parseBirdRoutes', () => {
  const output = [
    'BIRD 2.0.12 ready.',
    'Table master4:',
    '10.50.0.0/24         unicast [peer1 1796126678.250123] * (100) [AS65002i]',
    '\tvia 10.0.0.2 on eth0',
    '\tType: BGP univ',
    '\tBGP.origin: IGP',
    '\tBGP.as_path: 65002 64999',
    '\tBGP.next_hop: 10.0.0.2',
    '\tBGP.med: 5',
    '\tBGP.local_pref: 100',
    '\tBGP.community: (65000,100) (65000,200)',
    '\tBGP.large_community: (65000, 1, 2)',
    '                     unreachable [peer2 1796126679 from 10.0.0.9] (100) [i]',
    '\tType: BGP univ',
    '\tBGP.as_path: ',
    '\tBGP.next_hop: 10.0.0.7',
    '10.0.0.0/24          unicast [direct1 1796126600] * (240)',
    '\tdev eth0',
    '\tType: device univ',
    'Table master6:',
    'fd00:50::/64         unicast [peer3 1796126678] * (100) [AS65002i]',
    '\tvia fe80::1 on eth0',
    '\tType: BGP univ',
    '\tBGP.as_path: 65002',
    '\tBGP.next_hop: fd00::2 fe80::1',
    '',
  ].join('\n');

  it('reads every BGP path, the second path of a prefix included, and skips other protocols', () => {
    expect(parseBirdRoutes(output)).toEqual([
      {
        prefix: '10.50.0.0/24',
        protocol: 'peer1',
        best: true,
        nextHop: '10.0.0.2',
        asPath: [65002, 64999],
        communities: ['65000:100', '65000:200'],
        largeCommunities: ['65000:1:2'],
        localPref: 100,
        med: 5,
        receivedAt: 1796126678250,
      },
      {
        prefix: '10.50.0.0/24',
        protocol: 'peer2',
        best: false,
        nextHop: '10.0.0.7',
        asPath: [],
        communities: [],
        largeCommunities: [],
        localPref: undefined,
        med: undefined,
        receivedAt: 1796126679000,
      },
      {
        prefix: 'fd00:50::/64',
        protocol: 'peer3',
        best: true,
        nextHop: 'fd00::2',
        asPath: [65002],
        communities: [],
        largeCommunities: [],
        localPref: undefined,
        med: undefined,
        receivedAt: 1796126678000,
      },
    ]);
  });

  it('reads the BGP protocols of show protocols', () => {
    const protocols = parseBirdProtocols(
      [
        'BIRD 2.0.12 ready.',
        'Name       Proto      Table      State  Since         Info',
        'device1    Device     ---        up     1796126600    ',
        'peer1      BGP        ---        up     1796126600    Established   ',
        'peer2      BGP        ---        start  1796126600    Active        Socket: Connection refused',
      ].join('\n'),
    );
    expect([...protocols]).toEqual([
      ['peer1', { state: 'up', info: 'Established' }],
      ['peer2', { state: 'start', info: 'Active        Socket: Connection refused' }],
    ]);
  });
});

describe('FRR parsers', () => {
  it('reads learned paths, skipping the prefix header element and the router’s own routes', () => {
    const json = JSON.stringify({
      routes: {
        '10.50.0.0/24': [
          { prefix: '10.50.0.0/24', advertisedTo: {} },
          {
            aspath: { segments: [{ type: 'as-sequence', list: [65002, 64999] }] },
            valid: true,
            bestpath: { overall: true },
            community: { list: ['65000:100'] },
            largeCommunity: { list: ['65000:1:2'] },
            locPrf: 120,
            lastUpdate: { epoch: 1796126678, string: 'Tue Dec  1 12:04:38 2026\n' },
            nexthops: [{ ip: '10.0.0.2', afi: 'ipv4' }],
            peer: { peerId: '10.0.0.2' },
          },
        ],
        'fd00:50::/64': [{ prefix: 'fd00:50::/64' }, { nexthops: [{ ip: 'fe80::1', scope: 'link-local' }, { ip: 'fd00::2', scope: 'global' }], peer: { peerId: 'fd00::0002' } }],
        '10.60.0.0/24': [{ prefix: '10.60.0.0/24' }, { sourced: true, local: true, nexthops: [{ ip: '0.0.0.0' }], peer: { peerId: '0.0.0.0' } }],
      },
    });
    expect(parseFrrRoutes(json)).toEqual([
      { prefix: '10.50.0.0/24', nextHop: '10.0.0.2', asPath: [65002, 64999], communities: ['65000:100'], largeCommunities: ['65000:1:2'], from: '10.0.0.2', best: true, localPref: 120, med: undefined, receivedAt: 1796126678000 },
      { prefix: 'fd00:50::/64', nextHop: 'fd00::2', asPath: [], communities: [], largeCommunities: [], from: 'fd00::2', best: false, localPref: undefined, med: undefined, receivedAt: undefined },
    ]);
  });

  it('reads neighbor states', () => {
    const neighbors = parseFrrNeighbors(JSON.stringify({ '10.0.0.2': { remoteAs: 65002, bgpState: 'Active', lastResetDueTo: 'Peer closed the session' } }));
    expect(neighbors.get('10.0.0.2')).toEqual({ remoteAsn: 65002, state: 'Active', info: 'Active (last reset: Peer closed the session)' });
  });
});
