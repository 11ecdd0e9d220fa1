import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CommandRegistry } from './exec-runner.js';
import { NflogDecodeError, PcapNflogDecoder, decodeIpPacket, startNflogReader } from './nflog.js';
import type { NflogPacket } from './nflog.js';

/**
 * Four packets that tcpdump (4.99, libpcap 1.10, `tcpdump -i nflog:100 -U -w - -s 512`) captured from NFLOG rules on
 * lo in a test namespace: UDP 127.0.0.1 -> :9999 through a rule with `--nflog-prefix KRT-TEST`, UDP ::1 -> :9997, and
 * a TCP SYN to :9998 in each family. A little-endian pcap, as written on x86-64.
 */
const CAPTURE = Buffer.from(
  'd4c3b2a102000400000000000000000000020000ef0000000c55136b113009005c0000005c0000000200006408000100' +
  '080003000d000a004b52542d5445535400000000080005000000000108000b000000000008000e000000000025000900' +
  '450000216c9340004011d0367f0000017f000001a474270f000dfe2068656c6c6f0000000c55136b5f30090068000000' +
  '680000000a0000640800010086dd030005000a0000000000080005000000000108000b000000000008000e0000000000' +
  '3900090060057758000d11400000000000000000000000000000000100000000000000000000000000000001ac17270d' +
  '000d002068656c6c6f0000000c55136b613009006c0000006c00000002000064080001000800030005000a0000000000' +
  '080005000000000108000b000000000008000e0000000000400009004500003c789b40004006c41e7f0000017f000001' +
  'd77e270ebea4367300000000a002ffd7fe3000000204ffd70402080a7b4d0fef000000000103030a0c55136b63300900' +
  '80000000800000000a0000640800010086dd030005000a0000000000080005000000000108000b000000000008000e00' +
  '0000000054000900600cd64c002806400000000000000000000000000000000100000000000000000000000000000001' +
  'a43e270e42bd939800000000a002ffc4003000000204ffc40402080a44d2a965000000000103030a' +
  '',
  'hex',
);

describe('PcapNflogDecoder', () => {
  it('decodes every packet of a real capture: addresses, protocol, ports, prefix, group', () => {
    const { packets, skipped } = new PcapNflogDecoder().push(CAPTURE);
    expect(skipped).toEqual([]);
    expect(packets.map(({ family, src, dst, protocol, dstPort, group, prefix }) => ({ family, src, dst, protocol, dstPort, group, prefix }))).toEqual([
      { family: 'ipv4', src: '127.0.0.1', dst: '127.0.0.1', protocol: 'udp', dstPort: 9999, group: 100, prefix: 'KRT-TEST' },
      { family: 'ipv6', src: '::1', dst: '::1', protocol: 'udp', dstPort: 9997, group: 100, prefix: undefined },
      { family: 'ipv4', src: '127.0.0.1', dst: '127.0.0.1', protocol: 'tcp', dstPort: 9998, group: 100, prefix: undefined },
      { family: 'ipv6', src: '::1', dst: '::1', protocol: 'tcp', dstPort: 9998, group: 100, prefix: undefined },
    ]);
    expect(packets[0]).toMatchObject({ srcPort: 42100, length: 33, outIfindex: 1 });
    expect(packets[3]).toMatchObject({ srcPort: 42046, length: 80 });
    expect(packets[0]!.time.toISOString()).toBe(new Date(0x6b13550c * 1000 + 0x093011 / 1000).toISOString());
  });

  it('reads the same packets whatever the chunks split (one byte at a time)', () => {
    const decoder = new PcapNflogDecoder();
    const packets = [];
    for (let offset = 0; offset < CAPTURE.length; offset++) packets.push(...decoder.push(CAPTURE.subarray(offset, offset + 1)).packets);
    expect(packets).toEqual(new PcapNflogDecoder().push(CAPTURE).packets);
  });

  it('reads a big-endian capture the same', () => {
    expect(new PcapNflogDecoder().push(toBigEndian(CAPTURE)).packets).toEqual(new PcapNflogDecoder().push(CAPTURE).packets);
  });

  it('refuses a stream that is not a pcap of NFLOG', () => {
    expect(() => new PcapNflogDecoder().push(Buffer.alloc(24, 0x41))).toThrow(/not a pcap stream/);
    const ethernet = Buffer.from(CAPTURE.subarray(0, 24));
    ethernet.writeUInt32LE(1, 20);
    expect(() => new PcapNflogDecoder().push(ethernet)).toThrow(/link type 1, not NFLOG/);
  });

  it('skips a record without a payload and goes on with the next', () => {
    const first = recordAt(CAPTURE, 24);
    // The first record with its NFLOG TLVs cut to the header alone: no payload.
    const broken = Buffer.from(CAPTURE.subarray(24, 24 + 16 + 4));
    broken.writeUInt32LE(4, 8);
    broken.writeUInt32LE(4, 12);
    const stream = Buffer.concat([CAPTURE.subarray(0, 24), broken, CAPTURE.subarray(24 + first)]);
    const { packets, skipped } = new PcapNflogDecoder().push(stream);
    expect(skipped.map((error) => error.message)).toEqual(['NFLOG record without a payload']);
    expect(packets).toHaveLength(3);
  });
});

describe('decodeIpPacket', () => {
  const udp4 = new PcapNflogDecoder().push(CAPTURE).packets[0]!;
  const payloadOf = (index: number): Buffer => {
    // The IPv4 UDP packet of the capture, rebuilt from what was decoded of its record.
    const records: Buffer[] = [];
    for (let offset = 24; offset < CAPTURE.length; offset += recordAt(CAPTURE, offset)) records.push(CAPTURE.subarray(offset + 16, offset + recordAt(CAPTURE, offset)));
    const record = records[index]!;
    for (let offset = 4; offset < record.length; ) {
      const length = record.readUInt16LE(offset);
      if (record.readUInt16LE(offset + 2) === 9) return Buffer.from(record.subarray(offset + 4, offset + length));
      offset += (length + 3) & ~3;
    }
    throw new Error('no payload');
  };

  it('decodes SCTP ports as it does UDP ones', () => {
    const packet = payloadOf(0);
    packet[9] = 132;
    expect(decodeIpPacket(packet)).toMatchObject({ protocol: 'sctp', srcPort: udp4.srcPort, dstPort: 9999 });
  });

  it('leaves ports out of a later fragment and names protocols it does not know', () => {
    const fragment = payloadOf(0);
    fragment.writeUInt16BE(0x0010, 6);
    expect(decodeIpPacket(fragment)).toEqual({ family: 'ipv4', src: '127.0.0.1', dst: '127.0.0.1', protocol: 'udp', length: 33 });
    const gre = payloadOf(0);
    gre[9] = 47;
    expect(decodeIpPacket(gre)).toMatchObject({ protocol: 'proto-47' });
    expect(decodeIpPacket(gre)).not.toHaveProperty('dstPort');
  });

  it('reads the ports after an IPv6 extension header', () => {
    const tcp6 = payloadOf(3);
    // A hop-by-hop options header (8 bytes of padding) between the IPv6 header and TCP.
    const hopByHop = Buffer.from([6, 0, 1, 4, 0, 0, 0, 0]);
    const withOptions = Buffer.concat([tcp6.subarray(0, 40), hopByHop, tcp6.subarray(40)]);
    withOptions[6] = 0;
    withOptions.writeUInt16BE(tcp6.readUInt16BE(4) + 8, 4);
    expect(decodeIpPacket(withOptions)).toMatchObject({ family: 'ipv6', protocol: 'tcp', dstPort: 9998, srcPort: 42046, length: 88 });
  });

  it('refuses what is not a whole IP header', () => {
    expect(() => decodeIpPacket(payloadOf(0).subarray(0, 12))).toThrow(NflogDecodeError);
    expect(() => decodeIpPacket(payloadOf(1).subarray(0, 30))).toThrow(/IPv6 header truncated/);
    expect(() => decodeIpPacket(Buffer.from([0x20, 0, 0, 0]))).toThrow(/not an IP packet \(version 2\)/);
  });
});

// The stream handling of the reader, with a stand-in for tcpdump that writes a stream and waits; the real tcpdump is
// in nflog.real.test.ts (root).
describe('startNflogReader with a stand-in tcpdump', () => {
  let directory: string | undefined;
  afterAll(async () => {
    if (directory) await rm(directory, { recursive: true, force: true });
  });
  /** A script that says it listens, writes `stream` to stdout and sleeps: what tcpdump does on a quiet group. */
  const standIn = async (name: string, stream: Buffer): Promise<string> => {
    directory ??= await mkdtemp(join(tmpdir(), 'krt-nflog-'));
    await writeFile(join(directory, `${name}.pcap`), stream);
    const script = join(directory, name);
    await writeFile(script, `#!/bin/sh\necho "listening on $2, link-type NFLOG" >&2\ncat '${join(directory, `${name}.pcap`)}'\nexec sleep 30\n`);
    await chmod(script, 0o755);
    return script;
  };

  it('hands over each packet, tells a failing handler as a skipped record, and stops', async () => {
    const packets: NflogPacket[] = [];
    const skipped: string[] = [];
    const registry = new CommandRegistry();
    const reader = startNflogReader({
      group: 100,
      tcpdump: await standIn('quiet', CAPTURE),
      registry,
      onPacket: (packet) => {
        if (packet.family === 'ipv6' && packet.protocol === 'udp') throw new Error('a bug');
        packets.push(packet);
      },
      onSkipped: (error) => skipped.push(error.message),
    });
    await reader.listening;
    const deadline = Date.now() + 5_000;
    while (packets.length < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(packets.map((packet) => `${packet.family} ${packet.protocol}`)).toEqual(['ipv4 udp', 'ipv4 tcp', 'ipv6 tcp']);
    expect(skipped).toEqual(["the packet's handler failed: a bug"]);
    expect(registry.size).toBe(1);
    await expect(reader.stop()).resolves.toMatchObject({ stopped: true, reason: expect.stringMatching(/ was stopped; stderr: listening on nflog:100/) });
    expect(registry.size).toBe(0);
  });

  it('ends a stream that is not a pcap of NFLOG, not stopped, saying why', async () => {
    const ethernet = Buffer.from(CAPTURE);
    ethernet.writeUInt32LE(1, 20);
    const reader = startNflogReader({ group: 100, tcpdump: await standIn('ethernet', ethernet), onPacket: () => undefined });
    await expect(reader.ended).resolves.toMatchObject({
      stopped: false,
      reason: expect.stringMatching(/wrote a stream that cannot be read: pcap link type 1, not NFLOG \(239\)/),
    });
  });
});

/** The length of the record at `offset` of a little-endian capture, with its header. */
function recordAt(capture: Buffer, offset: number): number {
  return 16 + capture.readUInt32LE(offset + 8);
}

/** The capture as a big-endian host would have written it: pcap headers and NFLOG TLV headers swapped. */
function toBigEndian(capture: Buffer): Buffer {
  const out = Buffer.from(capture);
  for (const field of [0, 8, 12, 16, 20]) out.writeUInt32BE(capture.readUInt32LE(field), field);
  out.writeUInt16BE(capture.readUInt16LE(4), 4);
  out.writeUInt16BE(capture.readUInt16LE(6), 6);
  for (let offset = 24; offset < capture.length; offset += recordAt(capture, offset)) {
    for (let field = 0; field < 16; field += 4) out.writeUInt32BE(capture.readUInt32LE(offset + field), offset + field);
    const end = offset + recordAt(capture, offset);
    for (let tlv = offset + 16 + 4; tlv + 4 <= end; ) {
      const length = capture.readUInt16LE(tlv);
      out.writeUInt16BE(length, tlv);
      out.writeUInt16BE(capture.readUInt16LE(tlv + 2), tlv + 2);
      tlv += (length + 3) & ~3;
    }
  }
  return out;
}
