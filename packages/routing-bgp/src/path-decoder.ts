import type { AnyMessage, ApiPath } from './gobgp-api.js';

/**
 * A decoder of gobgp's path messages that reads only what routing needs: the NLRI prefix, the next hop, the family,
 * best, withdrawal and the neighbor. proto-loader decodes every field of every path and expands every attribute's
 * `Any` (about 30 µs a path, and ten times that before V8 has compiled it), which made a peer's burst of 5,000 best
 * paths cost more in the agent than gobgpd took to receive them. This reads the protobuf wire format directly and
 * skips the rest; a path decoded here carries only the fields below (other attributes keep just their `@type`).
 */

/** The numbers gobgp's Family enums use, as proto-loader's `enums: String` names them. */
const AFI_NAMES: Record<number, string> = { 0: 'AFI_UNKNOWN', 1: 'AFI_IP', 2: 'AFI_IP6', 25: 'AFI_L2VPN', 16388: 'AFI_LS', 16397: 'AFI_OPAQUE' };
const SAFI_NAMES: Record<number, string> = { 0: 'SAFI_UNKNOWN', 1: 'SAFI_UNICAST', 2: 'SAFI_MULTICAST' };
/** WatchEventResponse.PeerEvent.Type. */
const PEER_EVENT_TYPES: Record<number, string> = { 0: 'UNKNOWN', 1: 'INIT', 2: 'END_OF_INIT', 3: 'STATE' };

// gobgp-api.ts imports this module: its anyType is not initialised yet when these constants are.
const IP_ADDRESS_PREFIX = 'type.googleapis.com/apipb.IPAddressPrefix';
const NEXT_HOP_ATTRIBUTE = 'type.googleapis.com/apipb.NextHopAttribute';
const MP_REACH_ATTRIBUTE = 'type.googleapis.com/apipb.MpReachNLRIAttribute';

/** A malformed message: grpc-js ends the call with it, and the watch is opened again on the next sync. */
export class PathDecodeError extends Error {
  constructor(message: string) {
    super(`gobgp path message: ${message}`);
    this.name = 'PathDecodeError';
  }
}

const WIRE_VARINT = 0;
const WIRE_64BIT = 1;
const WIRE_BYTES = 2;
const WIRE_32BIT = 5;

/** A cursor over one message's bytes, `end` excluded. */
class Reader {
  constructor(
    readonly buf: Uint8Array,
    public pos: number,
    readonly end: number,
  ) {}

  get done(): boolean {
    return this.pos >= this.end;
  }

  /** A varint as a number: exact up to 2^53, which every field read here stays far below. */
  varint(): number {
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new PathDecodeError('truncated varint');
      const byte = this.buf[this.pos++]!;
      result += (byte & 0x7f) * scale;
      if (byte < 0x80) return result;
      scale *= 128;
    }
    throw new PathDecodeError('varint longer than 10 bytes');
  }

  /** The bounds of a length-delimited field. */
  bytes(): { start: number; end: number } {
    const length = this.varint();
    const start = this.pos;
    const end = start + length;
    if (end > this.end) throw new PathDecodeError('length beyond the message');
    this.pos = end;
    return { start, end };
  }

  string(): string {
    const { start, end } = this.bytes();
    return Buffer.from(this.buf.buffer, this.buf.byteOffset + start, end - start).toString('utf8');
  }

  sub(): Reader {
    const { start, end } = this.bytes();
    return new Reader(this.buf, start, end);
  }

  skip(wireType: number): void {
    switch (wireType) {
      case WIRE_VARINT:
        this.varint();
        return;
      case WIRE_64BIT:
        this.pos += 8;
        break;
      case WIRE_BYTES:
        this.bytes();
        return;
      case WIRE_32BIT:
        this.pos += 4;
        break;
      default:
        throw new PathDecodeError(`unsupported wire type ${wireType}`);
    }
    if (this.pos > this.end) throw new PathDecodeError('truncated fixed-width field');
  }

  /** Calls `field` for every field of the message; it returns false for a field it did not read, which is skipped. */
  fields(field: (number: number, wireType: number) => boolean): void {
    while (!this.done) {
      const tag = this.varint();
      const wireType = tag & 7;
      if (!field(Math.floor(tag / 8), wireType)) this.skip(wireType);
    }
  }
}

function expect(wireType: number, wanted: number, what: string): void {
  if (wireType !== wanted) throw new PathDecodeError(`${what} has wire type ${wireType}, not ${wanted}`);
}

function decodeFamily(reader: Reader): { afi: string; safi: string } {
  let afi = 0;
  let safi = 0;
  reader.fields((number, wireType) => {
    if (number === 1 && wireType === WIRE_VARINT) afi = reader.varint();
    else if (number === 2 && wireType === WIRE_VARINT) safi = reader.varint();
    else return false;
    return true;
  });
  return { afi: AFI_NAMES[afi] ?? String(afi), safi: SAFI_NAMES[safi] ?? String(safi) };
}

/** google.protobuf.Any: the prefix and next-hop messages decoded, any other only named by its `@type`. */
function decodeAny(reader: Reader): AnyMessage {
  let type = '';
  let value: Reader | undefined;
  reader.fields((number, wireType) => {
    if (number === 1 && wireType === WIRE_BYTES) type = reader.string();
    else if (number === 2 && wireType === WIRE_BYTES) value = reader.sub();
    else return false;
    return true;
  });
  const message: AnyMessage = { '@type': type };
  if (!value) return message;
  const inner = value;
  if (type === IP_ADDRESS_PREFIX) {
    message.prefixLen = 0;
    message.prefix = '';
    inner.fields((number, wireType) => {
      if (number === 1 && wireType === WIRE_VARINT) message.prefixLen = inner.varint();
      else if (number === 2 && wireType === WIRE_BYTES) message.prefix = inner.string();
      else return false;
      return true;
    });
  } else if (type === NEXT_HOP_ATTRIBUTE) {
    message.nextHop = '';
    inner.fields((number, wireType) => {
      if (number !== 1 || wireType !== WIRE_BYTES) return false;
      message.nextHop = inner.string();
      return true;
    });
  } else if (type === MP_REACH_ATTRIBUTE) {
    const nextHops: string[] = [];
    const nlris: AnyMessage[] = [];
    message.nextHops = nextHops;
    message.nlris = nlris;
    inner.fields((number, wireType) => {
      if (number === 1 && wireType === WIRE_BYTES) message.family = decodeFamily(inner.sub());
      else if (number === 2 && wireType === WIRE_BYTES) nextHops.push(inner.string());
      else if (number === 3 && wireType === WIRE_BYTES) nlris.push(decodeAny(inner.sub()));
      else return false;
      return true;
    });
  }
  return message;
}

/** apipb.Path: nlri 1, pattrs 2, best 4, is_withdraw 5, family 9, source_id 11, neighbor_ip 15. */
function decodePath(reader: Reader): ApiPath {
  const path: ApiPath = { pattrs: [], best: false, isWithdraw: false, neighborIp: '', sourceId: '' };
  const pattrs: AnyMessage[] = path.pattrs!;
  reader.fields((number, wireType) => {
    switch (number) {
      case 1:
        expect(wireType, WIRE_BYTES, 'Path.nlri');
        path.nlri = decodeAny(reader.sub());
        return true;
      case 2:
        expect(wireType, WIRE_BYTES, 'Path.pattrs');
        pattrs.push(decodeAny(reader.sub()));
        return true;
      case 4:
        expect(wireType, WIRE_VARINT, 'Path.best');
        path.best = reader.varint() !== 0;
        return true;
      case 5:
        expect(wireType, WIRE_VARINT, 'Path.is_withdraw');
        path.isWithdraw = reader.varint() !== 0;
        return true;
      case 9:
        expect(wireType, WIRE_BYTES, 'Path.family');
        path.family = decodeFamily(reader.sub());
        return true;
      case 11:
        expect(wireType, WIRE_BYTES, 'Path.source_id');
        path.sourceId = reader.string();
        return true;
      case 15:
        expect(wireType, WIRE_BYTES, 'Path.neighbor_ip');
        path.neighborIp = reader.string();
        return true;
      default:
        return false;
    }
  });
  return path;
}

/** One WatchEventResponse: a table event's paths, or a peer event's type. */
export interface WatchEvent {
  paths?: ApiPath[];
  peer?: { type: string };
}

/** Decodes a WatchEventResponse (peer 2, table 3 with its paths at 2). */
export function decodeWatchEvent(buf: Uint8Array): WatchEvent {
  const reader = new Reader(buf, 0, buf.length);
  const event: WatchEvent = {};
  reader.fields((number, wireType) => {
    if (number === 3 && wireType === WIRE_BYTES) {
      const table = reader.sub();
      const paths: ApiPath[] = (event.paths ??= []);
      table.fields((field, type) => {
        if (field !== 2 || type !== WIRE_BYTES) return false;
        paths.push(decodePath(table.sub()));
        return true;
      });
    } else if (number === 2 && wireType === WIRE_BYTES) {
      const peer = reader.sub();
      let type = 0;
      peer.fields((field, fieldType) => {
        if (field !== 1 || fieldType !== WIRE_VARINT) return false;
        type = peer.varint();
        return true;
      });
      event.peer = { type: PEER_EVENT_TYPES[type] ?? String(type) };
    } else return false;
    return true;
  });
  return event;
}

/** Decodes a ListPathResponse: its destination's paths (destination 1, paths at 2). */
export function decodeListPathResponse(buf: Uint8Array): ApiPath[] {
  const reader = new Reader(buf, 0, buf.length);
  const paths: ApiPath[] = [];
  reader.fields((number, wireType) => {
    if (number !== 1 || wireType !== WIRE_BYTES) return false;
    const destination = reader.sub();
    destination.fields((field, type) => {
      if (field !== 2 || type !== WIRE_BYTES) return false;
      paths.push(decodePath(destination.sub()));
      return true;
    });
    return true;
  });
  return paths;
}
