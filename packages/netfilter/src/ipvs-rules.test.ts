import { describe, expect, it } from 'vitest';
import { canonicalIpvsAddress, ipvsRestoreLine, parseIpvsConnectionTable, parseIpvsConnections, parseIpvsSave, parseIpvsStats } from './ipvs-rules.js';

// Captured from ipvsadm v1.31 on Debian 12's cloud kernel (the QEMU guest tier).
const SAVED = `-A -t 10.0.0.4:80 -s sh -p 300 -b sh-fallback,sh-port
-a -t 10.0.0.4:80 -r 10.1.0.1:8080 -m -w 0
-a -t 10.0.0.4:80 -r 10.1.0.2:80 -i -w 1 --tun-type ipip
-A -t 10.0.0.6:80 -s rr -p 300 -M 255.255.255.0
-A --sctp-service 10.0.0.5:9 -s mh -b mh-port
-A -u [fd00::1]:53 -s rr -p 10
-a -u [fd00::1]:53 -r [fd00:1::2]:53 -m -w 1
-A -f 7 -s rr
-a -f 7 -r 10.9.9.9:0 -g -w 1
`;

describe('parseIpvsSave', () => {
  it('reads services with their scheduler, flags, persistence and real servers, skipping fwmark services', () => {
    expect(parseIpvsSave(SAVED)).toEqual([
      {
        service: { protocol: 'tcp', address: '10.0.0.4', port: 80, scheduler: 'sh', flags: ['sh-fallback', 'sh-port'], persistentSeconds: 300 },
        destinations: [
          { address: '10.1.0.1', port: 8080, forwarding: 'masquerade', weight: 0 },
          { address: '10.1.0.2', port: 80, forwarding: 'tunnel', weight: 1 },
        ],
      },
      {
        service: { protocol: 'tcp', address: '10.0.0.6', port: 80, scheduler: 'rr', flags: [], persistentSeconds: 300, persistentNetmask: '255.255.255.0' },
        destinations: [],
      },
      { service: { protocol: 'sctp', address: '10.0.0.5', port: 9, scheduler: 'mh', flags: ['mh-port'] }, destinations: [] },
      {
        service: { protocol: 'udp', address: 'fd00::1', port: 53, scheduler: 'rr', flags: [], persistentSeconds: 10 },
        destinations: [{ address: 'fd00:1::2', port: 53, forwarding: 'masquerade', weight: 1 }],
      },
    ]);
  });

  it('round-trips what it renders', () => {
    const service = { protocol: 'udp' as const, address: 'fd00::a', port: 53, scheduler: 'mh', flags: ['mh-port', 'mh-fallback'], persistentSeconds: 60 };
    const destination = { address: 'fd00:10:244::5', port: 5353, forwarding: 'masquerade' as const, weight: 1 };
    const text = [ipvsRestoreLine.addService(service), ipvsRestoreLine.addDestination(service, destination)].join('\n');
    expect(text).toBe('-A -u [fd00::a]:53 -s mh -p 60 -b mh-fallback,mh-port\n-a -u [fd00::a]:53 -r [fd00:10:244::5]:5353 -m -w 1');
    expect(parseIpvsSave(text)).toEqual([{ service: { ...service, flags: ['mh-fallback', 'mh-port'] }, destinations: [destination] }]);
  });
});

describe('ipvsRestoreLine', () => {
  const key = { protocol: 'sctp' as const, address: '10.96.0.7', port: 9 };
  it('renders edits and deletions', () => {
    expect(ipvsRestoreLine.editService({ ...key, scheduler: 'lc', flags: [] })).toBe('-E --sctp-service 10.96.0.7:9 -s lc');
    expect(ipvsRestoreLine.deleteService(key)).toBe('-D --sctp-service 10.96.0.7:9');
    expect(ipvsRestoreLine.editDestination(key, { address: '10.244.0.3', port: 9, forwarding: 'masquerade', weight: 0 })).toBe(
      '-e --sctp-service 10.96.0.7:9 -r 10.244.0.3:9 -m -w 0',
    );
    expect(ipvsRestoreLine.deleteDestination(key, { address: '10.244.0.3', port: 9 })).toBe('-d --sctp-service 10.96.0.7:9 -r 10.244.0.3:9');
  });
});

describe('canonicalIpvsAddress', () => {
  it('compresses IPv6 and unmaps IPv4-mapped addresses', () => {
    expect(canonicalIpvsAddress('FD00:0:0::0001')).toBe('fd00::1');
    expect(canonicalIpvsAddress('::ffff:10.0.0.1')).toBe('10.0.0.1');
    expect(canonicalIpvsAddress('10.0.0.1')).toBe('10.0.0.1');
  });
});

describe('listings', () => {
  it('reads connection counts per real server', () => {
    const listing = `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn
TCP  10.0.0.4:80 sh (sh-fallback,sh-port) persistent 300
  -> 10.1.0.1:8080                Masq    0      3          7
UDP  [fd00::1]:53 rr persistent 10
  -> [fd00:1::2]:53               Masq    1      0          2
`;
    expect(parseIpvsConnections(listing)).toEqual([
      { service: { protocol: 'tcp', address: '10.0.0.4', port: 80 }, address: '10.1.0.1', port: 8080, activeConnections: 3, inactiveConnections: 7 },
      { service: { protocol: 'udp', address: 'fd00::1', port: 53 }, address: 'fd00:1::2', port: 53, activeConnections: 0, inactiveConnections: 2 },
    ]);
  });

  it('reads per-service counters', () => {
    const stats = `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes
  -> RemoteAddress:Port
TCP  10.0.0.4:80                        12      100       90     6000     9000
  -> 10.1.0.1:8080                       12      100       90     6000     9000
SCTP 10.0.0.5:9                          0        0        0        0        0
`;
    expect(parseIpvsStats(stats)).toEqual([
      { service: { protocol: 'tcp', address: '10.0.0.4', port: 80 }, connections: 12, packetsIn: 100, packetsOut: 90, bytesIn: 6000, bytesOut: 9000 },
      { service: { protocol: 'sctp', address: '10.0.0.5', port: 9 }, connections: 0, packetsIn: 0, packetsOut: 0, bytesIn: 0, bytesOut: 0 },
    ]);
  });
});

describe('parseIpvsConnectionTable', () => {
  it('keeps only the entries of one virtual service when asked, whatever the other columns hold', () => {
    const table = [
      'TCP 01:58  TIME_WAIT   10.244.0.5:51234   10.96.0.10:80      10.244.0.3:8080',
      'TCP 01:58  TIME_WAIT   10.244.0.5:51235   10.96.0.10:8080    10.244.0.3:80',
      'UDP 04:59  UDP         10.244.0.5:40000   10.96.0.10:80      10.244.0.3:8080',
      'UDP 04:59  UDP         [fd00:10:244::5]:40000 [fd00:10:96::a]:53 [fd00:10:244::3]:53',
    ].join('\n');
    expect(parseIpvsConnectionTable(table, { protocol: 'tcp', address: '10.96.0.10', port: 80 }).map((entry) => entry.client.port)).toEqual([51234]);
    expect(parseIpvsConnectionTable(table, { protocol: 'udp', address: 'fd00:10:96::a', port: 53 }).map((entry) => entry.client.port)).toEqual([40000]);
    expect(parseIpvsConnectionTable(table, { protocol: 'tcp', address: '10.96.0.1', port: 80 })).toEqual([]);
  });

  it('reads each connection with its client, virtual service and real server, persistence templates included', () => {
    // The layout of ipvsadm 1.31 `-Lcn`; the guest test (proxy-ipvs) reads a real kernel's table through it.
    const table = [
      'IPVS connection entries',
      'pro expire state       source             virtual            destination',
      'TCP 01:58  TIME_WAIT   10.244.0.5:51234   10.96.0.10:80      10.244.0.3:8080',
      'TCP 00:57  NONE        10.244.0.5:0       10.96.0.12:80      10.244.0.4:8080',
      'UDP 04:59  UDP         [fd00:10:244::5]:40000 [fd00:10:96::a]:53 [fd00:10:244::3]:53',
      'IP  05:59  NONE        10.244.0.5:0       0.0.0.1:0          10.244.0.3:0',
      '',
    ].join('\n');
    expect(parseIpvsConnectionTable(table)).toEqual([
      { protocol: 'tcp', expiresInSeconds: 118, state: 'TIME_WAIT', client: { address: '10.244.0.5', port: 51234 }, virtual: { address: '10.96.0.10', port: 80 }, destination: { address: '10.244.0.3', port: 8080 } },
      { protocol: 'tcp', expiresInSeconds: 57, state: 'NONE', client: { address: '10.244.0.5', port: 0 }, virtual: { address: '10.96.0.12', port: 80 }, destination: { address: '10.244.0.4', port: 8080 } },
      { protocol: 'udp', expiresInSeconds: 299, state: 'UDP', client: { address: 'fd00:10:244::5', port: 40000 }, virtual: { address: 'fd00:10:96::a', port: 53 }, destination: { address: 'fd00:10:244::3', port: 53 } },
    ]);
  });
});
