import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  asnProblem,
  bgpListenAddresses,
  decodeBase64,
  peersFromLists,
  planExternalPeers,
  type ExternalPeerSpec,
} from './external-peers.js';
import { externalPeerConfigs } from './peering.js';

const b64 = (text: string) => Buffer.from(text).toString('base64');

function node(annotations: Record<string, string>): V1Node {
  return { metadata: { name: 'node-1', annotations } };
}

const self = { primary: '10.0.0.1', byFamily: { ipv4: '10.0.0.1', ipv6: 'fd00::1' } };

function plan(annotations: Record<string, string>, configured: ExternalPeerSpec[] = []) {
  return planExternalPeers({ configured, node: node(annotations), self });
}

describe('asnProblem', () => {
  it.each([1, 23_455, 23_457, 63_999, 64_512, 65_534, 131_072, 4_199_999_999, 4_200_000_000, 4_294_967_294])('accepts %d', (asn) => {
    expect(asnProblem(asn)).toBeUndefined();
  });
  it.each([0, 23_456, 64_000, 64_511, 65_535, 131_071, 4_294_967_295, 1.5, -1])('rejects %d', (asn) => {
    expect(asnProblem(asn)).toBeDefined();
  });
});

describe('decodeBase64', () => {
  it('decodes padded base64 and rejects what Go would reject', () => {
    expect(decodeBase64(b64('s3cret!'))).toBe('s3cret!');
    expect(() => decodeBase64('not base64!')).toThrow('is not base64');
    // Missing padding: Node would decode it, Go's StdEncoding (kube-router) does not.
    expect(() => decodeBase64('YWJj ZA')).toThrow();
    expect(() => decodeBase64('YWJjZA')).toThrow();
  });

  it('refuses bytes that are not UTF-8 instead of changing the password (gobgpd takes it as text)', () => {
    expect(decodeBase64(b64('pässwörd'))).toBe('pässwörd');
    const latin1 = Buffer.from([0x70, 0xe4, 0x73, 0x73]).toString('base64'); // "päss" in Latin-1
    expect(() => decodeBase64(latin1)).toThrow('is not UTF-8 text once decoded');
    const { problems } = peersFromLists({ ips: ['192.0.2.1'], asns: ['65001'], passwords: [latin1] });
    expect(problems).toEqual([{ list: 'passwords', index: 0, message: 'the password is not UTF-8 text once decoded (gobgpd takes a password as text)' }]);
  });
});

describe('peersFromLists (the --peer-router-* flags and the per-field annotations)', () => {
  it('pairs the lists by index, blank entries taking the defaults', () => {
    const { peers, problems } = peersFromLists({
      ips: ['192.0.2.1', '2001:db8::1'],
      asns: ['65001', '4200000001'],
      ports: ['', '1790'],
      passwords: [b64('one'), ''],
      localIps: ['10.0.0.5', ''],
    });
    expect(problems).toEqual([]);
    expect(peers).toEqual([
      { address: '192.0.2.1', asn: 65_001, password: 'one', localAddress: '10.0.0.5' },
      { address: '2001:db8::1', asn: 4_200_000_001, port: 1790 },
    ]);
  });

  it('a list of the wrong length fails every peer; a bad entry only its own', () => {
    expect(peersFromLists({ ips: ['192.0.2.1', '192.0.2.2'], asns: ['65001'] })).toEqual({
      peers: [],
      problems: [{ list: 'asns', message: expect.stringContaining('1 ASNs for 2 peer addresses') }],
    });
    expect(peersFromLists({ ips: ['192.0.2.1'], asns: ['65001'], ports: ['1', '2'] }).problems[0]!.list).toBe('ports');
    const { peers, problems } = peersFromLists({
      ips: ['192.0.2.1', '10.1', '192.0.2.3', '192.0.2.4', '192.0.2.5'],
      asns: ['65001', '65002', '23456', '65004', 'x'],
      passwords: ['', '', '', '%%%', ''],
    });
    expect(peers.map((p) => p.address)).toEqual(['192.0.2.1']);
    expect(problems.map((p) => [p.list, p.index])).toEqual([
      ['ips', 1],
      ['asns', 2],
      ['passwords', 3],
      ['asns', 4],
    ]);
  });
});

describe('planExternalPeers', () => {
  it('reads kube-router.io/peers (YAML) with every field', () => {
    const result = plan({
      'kube-router.io/peers': [
        '- remoteip: 192.0.2.1',
        '  remoteasn: 65001',
        `  password: ${b64('md5pass')}`,
        '  port: 1790',
        '  localip: 10.0.0.9',
        '- remoteip: "2001:db8::7"',
        '  remoteasn: 64512',
      ].join('\n'),
    });
    expect(result.problems).toEqual([]);
    expect(result.peers).toEqual([
      { address: '192.0.2.1', asn: 65_001, port: 1790, password: 'md5pass', localAddress: '10.0.0.9', families: ['AFI_IP', 'AFI_IP6'], source: 'kube-router.io/peers' },
      // An IPv6 peer is dialled from the node's IPv6 address; the port defaults to BGP's, not --bgp-port.
      { address: '2001:db8::7', asn: 64_512, port: 179, localAddress: 'fd00::1', families: ['AFI_IP', 'AFI_IP6'], source: 'kube-router.io/peers' },
    ]);
  });

  it('prefers kube-router.io/peers over the per-field annotations, and the options over both', () => {
    const annotations = {
      'kube-router.io/peers': '- {remoteip: 192.0.2.1, remoteasn: 65001}',
      'kube-router.io/peer.ips': '192.0.2.2',
      'kube-router.io/peer.asns': '65002',
    };
    expect(plan(annotations).peers.map((p) => p.address)).toEqual(['192.0.2.1']);
    const { 'kube-router.io/peers': _, ...perField } = annotations;
    expect(plan(perField).peers.map((p) => [p.address, p.source])).toEqual([['192.0.2.2', 'kube-router.io/peer.ips']]);
    expect(plan(annotations, [{ address: '198.51.100.1', asn: 65_100 }]).peers.map((p) => [p.address, p.source])).toEqual([['198.51.100.1', 'options']]);
  });

  it('the per-field annotations with ports, passwords and local addresses', () => {
    const result = plan({
      'kube-router.io/peer.ips': '192.0.2.1,192.0.2.2',
      'kube-router.io/peer.asns': '65001,65002',
      'kube-router.io/peer.ports': '179,1790',
      'kube-router.io/peer.passwords': `${b64('a')},`,
      'kube-router.io/peer.localips': ',10.0.0.7',
    });
    expect(result.problems).toEqual([]);
    expect(result.peers.map(({ address, port, password, localAddress }) => ({ address, port, password, localAddress }))).toEqual([
      { address: '192.0.2.1', port: 179, password: 'a', localAddress: '10.0.0.1' },
      { address: '192.0.2.2', port: 1790, password: undefined, localAddress: '10.0.0.7' },
    ]);
  });

  it('bad input: each problem names its annotation and entry, the good peers stay', () => {
    const unparsable = plan({ 'kube-router.io/peers': '- remoteip: [192.0.2.1' });
    expect(unparsable.peers).toEqual([]);
    expect(unparsable.problems[0]!.message).toMatch(/^kube-router\.io\/peers is not valid YAML/);
    const mixed = plan({
      'kube-router.io/peers': [
        '- {remoteip: 192.0.2.1, remoteasn: 65001}',
        '- {remoteip: 192.0.2.2, remoteasn: 64000}',
        '- {remoteip: 192.0.2.300, remoteasn: 65003}',
        '- {remoteip: 192.0.2.4, remoteasn: 65004, password: "not base64"}',
        '- {remoteasn: 65005}',
        '- just a string',
      ].join('\n'),
    });
    expect(mixed.peers.map((p) => p.address)).toEqual(['192.0.2.1']);
    expect(mixed.problems.map((p) => p.message)).toEqual([
      'kube-router.io/peers entry 2: remoteasn ASN 64000 is reserved',
      'kube-router.io/peers entry 3: remoteip "192.0.2.300" is not an IP address',
      'kube-router.io/peers entry 4: password the password is not base64',
      'kube-router.io/peers entry 5: remoteip cannot be empty',
      'kube-router.io/peers entry 6: must be a mapping with remoteip and remoteasn',
    ]);
    expect(plan({ 'kube-router.io/peers': 'remoteip: 192.0.2.1' }).problems[0]!.message).toBe('kube-router.io/peers must be a YAML list of peers');
    const perField = plan({ 'kube-router.io/peer.ips': '192.0.2.1,192.0.2.2', 'kube-router.io/peer.asns': '65001,abc' });
    expect(perField.peers.map((p) => p.address)).toEqual(['192.0.2.1']);
    expect(perField.problems.map((p) => p.message)).toEqual(['kube-router.io/peer.asns entry 2: "abc" is not an ASN']);
  });

  it('a peer of a family this node has no address in, or with a local address of the other family, is a problem', () => {
    const v4only = planExternalPeers({
      configured: [{ address: '2001:db8::1', asn: 65_001 }, { address: '192.0.2.1', asn: 65_001, localAddress: 'fd00::1' }],
      node: node({}),
      self: { primary: '10.0.0.1', byFamily: { ipv4: '10.0.0.1' } },
    });
    expect(v4only.peers).toEqual([]);
    expect(v4only.problems.map((p) => p.message)).toEqual([
      'options: peer 2001:db8::1 is ipv6 but this node has no ipv6 address to dial it from',
      'options: peer 192.0.2.1 is ipv4 but this node has no ipv4 address to dial it from (localip fd00::1)',
    ]);
  });

  it('no annotations, no peers, no problems', () => {
    expect(plan({})).toEqual({ peers: [], problems: [], incomplete: false });
    expect(plan({ 'kube-router.io/peer.ips': '192.0.2.1' })).toEqual({ peers: [], problems: [], incomplete: false });
  });
});

describe('externalPeerConfigs', () => {
  it('sets the password, multihop above TTL 1 only, and graceful restart', () => {
    const [peer] = plan({}, [{ address: '192.0.2.1', asn: 65_001, password: 'pw', port: 1790 }]).peers;
    const settings = { bgpPort: 179, holdTimeSeconds: 90, peerMultihopTtl: 1 };
    expect(externalPeerConfigs([peer!], settings)[0]!.config).toEqual({
      neighborAddress: '192.0.2.1',
      peerAsn: 65_001,
      localAddress: '10.0.0.1',
      remotePort: 1790,
      holdTimeSeconds: 90,
      families: ['AFI_IP', 'AFI_IP6'],
      password: 'pw',
    });
    const gracefulRestart = { restartTimeSeconds: 120, deferralTimeSeconds: 30 };
    expect(externalPeerConfigs([peer!], { ...settings, peerMultihopTtl: 5, gracefulRestart })[0]!.config).toMatchObject({
      ebgpMultihopTtl: 5,
      gracefulRestart,
    });
  });
});

describe('bgpListenAddresses (kube-router.io/bgp-local-addresses)', () => {
  it('lists the addresses, which must be this node’s', () => {
    expect(bgpListenAddresses(node({}), ['10.0.0.1'])).toBeUndefined();
    expect(bgpListenAddresses(node({ 'kube-router.io/bgp-local-addresses': '10.0.0.1, fd00::1' }), ['10.0.0.1', 'fd00::1'])).toEqual(['10.0.0.1', 'fd00::1']);
    expect(() => bgpListenAddresses(node({ 'kube-router.io/bgp-local-addresses': '10.0.0.300' }), ['10.0.0.1'])).toThrow('is not an IP address');
    expect(() => bgpListenAddresses(node({ 'kube-router.io/bgp-local-addresses': '10.0.0.2' }), ['10.0.0.1'])).toThrow('not an address of this node');
  });
});

describe('kube-router.io/peers never leaks a password', () => {
  it('a YAML warning or error is a problem naming its code and line, never quoting the annotation, and no process warning', async () => {
    const secret = b64('hunter2-secret');
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name} ${warning.message}`);
    process.on('warning', onWarning);
    try {
      const tagged = plan({ 'kube-router.io/peers': `- remoteip: 192.0.2.1\n  remoteasn: 65001\n  password: !secret ${secret}\n` });
      const broken = plan({ 'kube-router.io/peers': `- remoteip: 192.0.2.1\n  password: ${secret}\n  password: ${secret}\n - x: [` });
      // Process warnings are emitted on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
      expect(tagged.problems.map((p) => p.message)).toEqual(['kube-router.io/peers is not valid YAML: TAG_RESOLVE_FAILED at line 3']);
      expect(tagged.incomplete).toBe(true);
      expect(broken.peers).toEqual([]);
      expect(broken.problems.map((p) => p.message)).toContain('kube-router.io/peers is not valid YAML: DUPLICATE_KEY at line 3');
      for (const message of [...tagged.problems, ...broken.problems].map((p) => p.message)) {
        expect(message).not.toContain(secret);
        expect(message).not.toContain('hunter2');
      }
      expect(warnings).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('a bad password entry names its field, not its value', () => {
    const result = plan({ 'kube-router.io/peers': '- {remoteip: 192.0.2.1, remoteasn: 65001, password: "not base64 hunter2"}' });
    expect(result.problems.map((p) => p.message)).toEqual(['kube-router.io/peers entry 1: password the password is not base64']);
  });
});

describe('one reading of numbers and addresses, as kube-router (Go) reads them', () => {
  it('ASNs and ports as strconv.ParseUint(s, 0, bits): 0x hex and octal, no exponent, sign or fraction', () => {
    const asns = (values: string[]) =>
      peersFromLists({ ips: values.map((_, i) => `192.0.2.${i + 1}`), asns: values }).peers.map((p) => p.asn);
    expect(asns(['0x10', '65_001', '0o20', '020'])).toEqual([16, 65_001, 16, 16]);
    for (const bad of ['1e5', '65001.0', '+65001', '-1', '0x', '65__001', '4294967296']) {
      expect(peersFromLists({ ips: ['192.0.2.1'], asns: [bad] }).problems, bad).toHaveLength(1);
    }
    expect(peersFromLists({ ips: ['192.0.2.1'], asns: ['65001'], ports: ['0x6c6'] }).peers[0]?.port).toBe(1734);
    expect(peersFromLists({ ips: ['10.1'], asns: ['65001'] }).problems[0]?.message).toContain('is not an IP address');
  });

  it('peer addresses as net.ParseIP reads them: no octal part, no zone, ::1.2.3.4 stays IPv6', () => {
    for (const bad of ['010.0.0.1', 'fe80::1%eth0', '::01.2.3.4']) {
      expect(peersFromLists({ ips: [bad], asns: ['65001'] }).problems[0]?.message, bad).toContain('is not an IP address');
    }
    expect(peersFromLists({ ips: ['::1.2.3.4'], asns: ['65001'], localIps: ['::ffff:192.0.2.1'] }).peers).toEqual([
      { address: '::102:304', asn: 65_001, localAddress: '192.0.2.1' },
    ]);
  });
});
