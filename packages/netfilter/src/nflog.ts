import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import ipaddr from 'ipaddr.js';
import type { IpFamily } from './family.js';
import { runningCommands } from './exec-runner.js';
import { killLeftoverProcesses } from './leftovers.js';
import type { CommandRegistry } from './exec-runner.js';

/** One packet a netfilter rule logged to an NFLOG group, decoded down to its transport ports. */
export interface NflogPacket {
  /** When the kernel logged it (the capture's timestamp). */
  readonly time: Date;
  /** The NFLOG group (the rule's `--nflog-group` / `log group`). */
  readonly group: number;
  /** The rule's log prefix, when it set one. */
  readonly prefix?: string;
  /** The interface the packet came in on / is going out of, by index, when the kernel said. */
  readonly inIfindex?: number;
  readonly outIfindex?: number;
  readonly family: IpFamily;
  readonly src: string;
  readonly dst: string;
  /** `tcp`, `udp`, `sctp`, `icmp`, `icmpv6`, or `proto-<number>` for any other. */
  readonly protocol: string;
  /** TCP, UDP and SCTP only, when the capture holds them. */
  readonly srcPort?: number;
  readonly dstPort?: number;
  /** The IP packet's length as its header says (the capture may hold less). */
  readonly length: number;
}

/** A record of the stream that is not an IP packet this decoder reads: skipped, with the reason. */
export class NflogDecodeError extends Error {
  override readonly name = 'NflogDecodeError';
}

/** libpcap's link type of `nflog:<group>` captures. */
export const LINKTYPE_NFLOG = 239;
const NFULA_PAYLOAD = 9;
const NFULA_PREFIX = 10;
const NFULA_IFINDEX_INDEV = 4;
const NFULA_IFINDEX_OUTDEV = 5;
const PCAP_HEADER_BYTES = 24;
const RECORD_HEADER_BYTES = 16;
/** Larger records than this are not a capture of ours (tcpdump's snap length is far below). */
const MAX_RECORD_BYTES = 262_144;

const PROTOCOLS: Record<number, string> = { 1: 'icmp', 6: 'tcp', 17: 'udp', 58: 'icmpv6', 132: 'sctp' };
const WITH_PORTS = new Set([6, 17, 132]);
/** IPv6 extension headers that carry a next-header byte and a length in 8-octet units (after the first 8). */
const IPV6_EXTENSIONS = new Set([0, 43, 60]);
const IPV6_FRAGMENT = 44;

/**
 * The IP header and transport ports of one packet. Throws NflogDecodeError for anything but a whole IPv4 or IPv6
 * header; ports are left out when the capture ends before them or the packet is a later fragment.
 */
export function decodeIpPacket(bytes: Uint8Array): Omit<NflogPacket, 'time' | 'group' | 'prefix' | 'inIfindex' | 'outIfindex'> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < 1) throw new NflogDecodeError('empty payload');
  const version = bytes[0]! >> 4;
  if (version === 4) {
    const headerBytes = (bytes[0]! & 0x0f) * 4;
    if (bytes.length < 20 || headerBytes < 20) throw new NflogDecodeError(`IPv4 header truncated or invalid (${bytes.length} bytes captured)`);
    const protocolNumber = bytes[9]!;
    // A later fragment carries no transport header.
    const laterFragment = (view.getUint16(6) & 0x1fff) !== 0;
    return {
      family: 'ipv4',
      src: ipaddr.fromByteArray([...bytes.subarray(12, 16)]).toString(),
      dst: ipaddr.fromByteArray([...bytes.subarray(16, 20)]).toString(),
      length: view.getUint16(2),
      ...transport(protocolNumber, laterFragment ? undefined : headerBytes, view),
    };
  }
  if (version === 6) {
    if (bytes.length < 40) throw new NflogDecodeError(`IPv6 header truncated (${bytes.length} bytes captured)`);
    let next = bytes[6]!;
    let offset = 40;
    let laterFragment = false;
    while ((IPV6_EXTENSIONS.has(next) || next === IPV6_FRAGMENT) && offset + 8 <= bytes.length) {
      const header = next;
      next = bytes[offset]!;
      if (header === IPV6_FRAGMENT) {
        laterFragment = (view.getUint16(offset + 2) & 0xfff8) !== 0;
        offset += 8;
      } else {
        offset += 8 + bytes[offset + 1]! * 8;
      }
    }
    return {
      family: 'ipv6',
      src: ipaddr.fromByteArray([...bytes.subarray(8, 24)]).toString(),
      dst: ipaddr.fromByteArray([...bytes.subarray(24, 40)]).toString(),
      length: 40 + view.getUint16(4),
      ...transport(next, laterFragment ? undefined : offset, view),
    };
  }
  throw new NflogDecodeError(`not an IP packet (version ${version})`);
}

function transport(protocolNumber: number, offset: number | undefined, view: DataView): { protocol: string; srcPort?: number; dstPort?: number } {
  const protocol = PROTOCOLS[protocolNumber] ?? `proto-${protocolNumber}`;
  // TCP, UDP and SCTP all begin with the source and destination ports.
  if (offset === undefined || !WITH_PORTS.has(protocolNumber) || offset + 4 > view.byteLength) return { protocol };
  return { protocol, srcPort: view.getUint16(offset), dstPort: view.getUint16(offset + 2) };
}

/**
 * One LINKTYPE_NFLOG record: the 4-byte NFLOG header (family, version, group), then TLVs whose length and type are in
 * the byte order of the host that captured them (the pcap file's), padded to 4 bytes; the payload TLV is the IP packet.
 */
export function decodeNflogRecord(record: Uint8Array, time: Date, littleEndian: boolean): NflogPacket {
  if (record.length < 4) throw new NflogDecodeError(`NFLOG record of ${record.length} bytes has no header`);
  const view = new DataView(record.buffer, record.byteOffset, record.byteLength);
  const group = view.getUint16(2);
  let payload: Uint8Array | undefined;
  let prefix: string | undefined;
  let inIfindex: number | undefined;
  let outIfindex: number | undefined;
  let offset = 4;
  while (offset + 4 <= record.length) {
    const length = view.getUint16(offset, littleEndian);
    const type = view.getUint16(offset + 2, littleEndian) & 0x7fff;
    if (length < 4) throw new NflogDecodeError(`NFLOG TLV of length ${length} at byte ${offset}`);
    // The capture may end inside the last TLV (the payload, cut at the snap length): what is there is read.
    const value = record.subarray(offset + 4, Math.min(offset + length, record.length));
    if (type === NFULA_PAYLOAD) payload = value;
    else if (type === NFULA_PREFIX) prefix = Buffer.from(value).toString('utf8').replace(/\0.*$/s, '');
    else if (type === NFULA_IFINDEX_INDEV && value.length >= 4) inIfindex = new DataView(value.buffer, value.byteOffset, 4).getUint32(0);
    else if (type === NFULA_IFINDEX_OUTDEV && value.length >= 4) outIfindex = new DataView(value.buffer, value.byteOffset, 4).getUint32(0);
    offset += (length + 3) & ~3;
  }
  if (!payload) throw new NflogDecodeError('NFLOG record without a payload');
  return {
    time,
    group,
    ...(prefix ? { prefix } : {}),
    ...(inIfindex === undefined ? {} : { inIfindex }),
    ...(outIfindex === undefined ? {} : { outIfindex }),
    ...decodeIpPacket(payload),
  };
}

/** What one chunk of the stream held: the packets, and the records skipped with why. */
export interface NflogChunk {
  readonly packets: NflogPacket[];
  readonly skipped: NflogDecodeError[];
}

/**
 * A pcap stream (`tcpdump -w -`) of an nflog interface, decoded as it arrives: the global header, then records of a
 * 16-byte header and the captured bytes. Chunks may split anything anywhere. A stream that is not a pcap of NFLOG
 * throws from push(): nothing after it can be read.
 */
export class PcapNflogDecoder {
  #pending: Buffer = Buffer.alloc(0);
  #littleEndian: boolean | undefined;
  #nanoseconds = false;

  push(chunk: Uint8Array): NflogChunk {
    this.#pending = this.#pending.length === 0 ? Buffer.from(chunk) : Buffer.concat([this.#pending, chunk]);
    const packets: NflogPacket[] = [];
    const skipped: NflogDecodeError[] = [];
    let offset = 0;
    if (this.#littleEndian === undefined) {
      if (this.#pending.length < PCAP_HEADER_BYTES) return { packets, skipped };
      this.#readHeader(this.#pending.subarray(0, PCAP_HEADER_BYTES));
      offset = PCAP_HEADER_BYTES;
    }
    const little = this.#littleEndian!;
    while (this.#pending.length - offset >= RECORD_HEADER_BYTES) {
      const seconds = little ? this.#pending.readUInt32LE(offset) : this.#pending.readUInt32BE(offset);
      const fraction = little ? this.#pending.readUInt32LE(offset + 4) : this.#pending.readUInt32BE(offset + 4);
      const captured = little ? this.#pending.readUInt32LE(offset + 8) : this.#pending.readUInt32BE(offset + 8);
      if (captured > MAX_RECORD_BYTES) throw new NflogDecodeError(`pcap record of ${captured} bytes: the stream is corrupt`);
      if (this.#pending.length - offset - RECORD_HEADER_BYTES < captured) break;
      const record = this.#pending.subarray(offset + RECORD_HEADER_BYTES, offset + RECORD_HEADER_BYTES + captured);
      offset += RECORD_HEADER_BYTES + captured;
      const time = new Date(seconds * 1000 + (this.#nanoseconds ? fraction / 1e6 : fraction / 1e3));
      try {
        packets.push(decodeNflogRecord(record, time, little));
      } catch (error) {
        if (!(error instanceof NflogDecodeError)) throw error;
        skipped.push(error);
      }
    }
    // Copied: the rest must not keep the whole chunk alive.
    this.#pending = Buffer.from(this.#pending.subarray(offset));
    return { packets, skipped };
  }

  #readHeader(header: Buffer): void {
    const magic = header.readUInt32LE(0);
    const magics: Record<number, [boolean, boolean]> = {
      0xa1b2c3d4: [true, false],
      0xa1b23c4d: [true, true],
      0xd4c3b2a1: [false, false],
      0x4d3cb2a1: [false, true],
    };
    const known = magics[magic];
    if (!known) throw new NflogDecodeError(`not a pcap stream (magic 0x${magic.toString(16)})`);
    [this.#littleEndian, this.#nanoseconds] = known;
    const linkType = (this.#littleEndian ? header.readUInt32LE(20) : header.readUInt32BE(20)) & 0x0fffffff;
    if (linkType !== LINKTYPE_NFLOG) throw new NflogDecodeError(`pcap link type ${linkType}, not NFLOG (${LINKTYPE_NFLOG})`);
  }
}

export interface NflogReaderOptions {
  /** The NFLOG group to read; one reader per group and network namespace (the kernel binds a group to one socket). */
  readonly group: number;
  /** Reads the group of this network namespace (`ip netns exec`). */
  readonly netns?: string;
  /** The tcpdump binary. Default `tcpdump`. */
  readonly tcpdump?: string;
  /** The `ip` binary for `ip netns exec`. Default `ip`. */
  readonly ipCommand?: string;
  onPacket(packet: NflogPacket): void;
  /** A record that is not an IP packet (skipped). */
  onSkipped?(error: NflogDecodeError): void;
  /** Where the reader is tracked, so that stopping the agent ends it with every other command. Default `runningCommands`. */
  readonly registry?: CommandRegistry;
}

/** How a reader ended. `stopped` when stop() or the registry ended it; otherwise tcpdump went on its own. */
export interface NflogReaderEnd {
  readonly stopped: boolean;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** Why it could not start or read, with the end of tcpdump's stderr. */
  readonly reason: string;
}

export interface NflogReader {
  /** Resolves once tcpdump listens on the group (it said so on stderr); rejects when it ended before. */
  readonly listening: Promise<void>;
  /** Settles once, never rejects. */
  readonly ended: Promise<NflogReaderEnd>;
  /** Ends tcpdump (SIGTERM, then SIGKILL of its process group after 2 s); resolves with its end. */
  stop(): Promise<NflogReaderEnd>;
}

const STDERR_KEPT_BYTES = 4000;
const STOP_GRACE_MS = 2_000;

function readerArgs(group: number): string[] {
  return ['-i', `nflog:${group}`, '-n', '-U', '--immediate-mode', '-w', '-'];
}

/**
 * Kills the tcpdump of a reader an earlier agent left behind on this group and network namespace (an agent killed
 * with SIGKILL cannot end its reader's process group): the kernel binds a group to one socket, so it would keep the
 * successor's reader out. Only a tcpdump with exactly the reader's arguments is touched, never one an operator runs.
 */
export function killLeftoverNflogReaders(group: number, netns?: string): Promise<number[]> {
  const args = readerArgs(group);
  return killLeftoverProcesses({
    ...(netns !== undefined && { netns }),
    matches: (argv) => argv[0]?.endsWith('tcpdump') === true && argv.slice(1, 1 + args.length).join('\0') === args.join('\0'),
  });
}

/**
 * Reads an NFLOG group through tcpdump (libpcap's `nflog:<group>` device): no kernel module or daemon of our own, and
 * nothing runs until a reader is started. tcpdump writes the capture to stdout unbuffered (`-U`, `--immediate-mode`)
 * and it is decoded as it arrives. A long-running reader is not a command with a deadline: it is spawned here rather
 * than through a CommandRunner, in its own process group, and tracked by the registry so that the agent's stop ends it.
 */
export function startNflogReader(options: NflogReaderOptions): NflogReader {
  const tcpdump = options.tcpdump ?? 'tcpdump';
  // No small snap length (-s): libpcap's nflog reads the kernel's batches into a buffer of that size, and a batch of
  // several packets larger than it is lost (measured: 4 of 5 packets read with -s 256).
  const args = readerArgs(options.group);
  const [file, argv] = options.netns
    ? [options.ipCommand ?? 'ip', ['netns', 'exec', options.netns, tcpdump, ...args]]
    : [tcpdump, args];
  const registry = options.registry ?? runningCommands;
  let stopped = false;
  let stderr = '';
  let settleEnd: (end: NflogReaderEnd) => void = () => undefined;
  const ended = new Promise<NflogReaderEnd>((resolve) => (settleEnd = resolve));
  let listened: () => void = () => undefined;
  let notListening: (error: Error) => void = () => undefined;
  const listening = new Promise<void>((resolve, reject) => {
    listened = resolve;
    notListening = reject;
  });
  // A caller that only awaits `ended` must not see an unhandled rejection.
  listening.catch(() => undefined);
  const where = options.netns ? ` (netns ${options.netns})` : '';
  const describe = (what: string) => {
    const tail = stderr.trim().split('\n').slice(-3).join('; ');
    return `${[file, ...argv].join(' ')}${where} ${what}${tail ? `; stderr: ${tail}` : ''}`;
  };
  let done = false;
  const finish = (end: Omit<NflogReaderEnd, 'stopped'>) => {
    if (done) return;
    done = true;
    untrack();
    clearTimeout(killTimer);
    notListening(new Error(end.reason));
    settleEnd({ ...end, stopped });
  };
  let killTimer: NodeJS.Timeout | undefined;
  let streamError: string | undefined;
  let child: ChildProcess | undefined;
  const kill = (signal: NodeJS.Signals) => {
    if (child?.pid === undefined) return;
    try {
      process.kill(-child.pid, signal);
    } catch {
      child.kill(signal);
    }
  };
  const terminate = () => {
    kill('SIGTERM');
    killTimer = setTimeout(() => kill('SIGKILL'), STOP_GRACE_MS);
    killTimer.unref();
  };
  const stop = (): Promise<NflogReaderEnd> => {
    if (!done && !stopped) {
      stopped = true;
      if (streamError === undefined) terminate();
    }
    return ended;
  };
  const untrack = registry.track({ kill: () => void stop() });
  const halted = registry.haltedBecause;
  if (halted !== undefined) {
    stopped = true;
    finish({ code: null, signal: null, reason: describe(`was not run: ${halted}`) });
    return { listening, ended, stop };
  }

  try {
    child = spawn(file, argv, { stdio: ['ignore', 'pipe', 'pipe'], detached: true, env: { ...process.env, LC_ALL: 'C' } });
  } catch (error) {
    finish({ code: null, signal: null, reason: describe(`could not start: ${error instanceof Error ? error.message : String(error)}`) });
    return { listening, ended, stop };
  }
  const decoder = new PcapNflogDecoder();
  child.stdout!.on('data', (chunk: Buffer) => {
    if (streamError !== undefined) return;
    let decoded: NflogChunk;
    try {
      decoded = decoder.push(chunk);
    } catch (error) {
      // Nothing after a broken stream can be read: tcpdump goes, and its owner starts another.
      streamError = error instanceof Error ? error.message : String(error);
      terminate();
      return;
    }
    // A handler's bug must not become an uncaught exception of the agent: a packet's is told as a skipped record,
    // and one of onSkipped itself is dropped.
    const skip = (error: NflogDecodeError) => {
      try {
        options.onSkipped?.(error);
      } catch {
        // Nothing left to tell it to.
      }
    };
    for (const packet of decoded.packets) {
      try {
        options.onPacket(packet);
      } catch (error) {
        skip(new NflogDecodeError(`the packet's handler failed: ${error instanceof Error ? error.message : String(error)}`));
      }
    }
    for (const error of decoded.skipped) skip(error);
  });
  // A pipe that fails is followed by the process's close, which says how it ended.
  child.stdout!.on('error', () => undefined);
  child.stderr!.on('error', () => undefined);
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-STDERR_KEPT_BYTES);
    if (/listening on /.test(stderr)) listened();
  });
  child.on('error', (error) => finish({ code: null, signal: null, reason: describe(`could not start: ${error.message}`) }));
  child.on('close', (code, signal) => {
    const what =
      streamError !== undefined
        ? `wrote a stream that cannot be read: ${streamError}`
        : stopped
          ? 'was stopped'
          : code === null
            ? `was killed by ${signal ?? 'a signal'}`
            : `exited with code ${code}`;
    finish({ code, signal, reason: describe(what) });
  });
  return { listening, ended, stop };
}
