import { existsSync } from 'node:fs';
import { join } from 'node:path';
import * as protoLoader from '@grpc/proto-loader';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { anyType, DEFAULT_GOBGP_PROTO_DIR, type AnyMessage, type ApiPath } from './gobgp-api.js';
import { decodeListPathResponse, decodeWatchEvent, PathDecodeError } from './path-decoder.js';
import { isLocalPath, learnedBestPaths, pathNextHop, pathPrefix, podCidrPath } from './paths.js';

const protosInstalled = existsSync(join(DEFAULT_GOBGP_PROTO_DIR, 'gobgp.proto'));

/** gobgp's messages encoded and decoded by proto-loader with the options the client uses: the reference. */
function reference() {
  const definition = protoLoader.loadSync(['gobgp.proto', 'attribute.proto', 'capability.proto'], {
    includeDirs: [DEFAULT_GOBGP_PROTO_DIR],
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
    json: true,
  });
  const service = definition['apipb.GobgpApi'] as Record<string, protoLoader.MethodDefinition<unknown, unknown>>;
  return { watch: service.WatchEvent!, list: service.ListPath! };
}

/** What routing reads of a path: the decoders must agree on exactly this. */
const routingView = (path: ApiPath) => ({
  family: path.family,
  prefix: pathPrefix(path),
  nextHop: pathNextHop(path),
  best: path.best,
  isWithdraw: path.isWithdraw,
  neighborIp: path.neighborIp,
  local: isLocalPath(path),
  sourceId: path.sourceId,
  types: path.pattrs?.map((a) => a['@type']),
});

const learned = (path: ApiPath, neighbor: string, extra: Partial<ApiPath> = {}): ApiPath => ({
  ...path,
  neighborIp: neighbor,
  sourceId: neighbor,
  best: true,
  age: { seconds: 1_700_000_000, nanos: 5 },
  sourceAsn: 64512,
  uuid: Buffer.from([1, 2, 3]),
  validation: { state: 'STATE_VALID', reason: 'REASON_NONE' },
  ...extra,
} as ApiPath);

const otherAttributes: AnyMessage[] = [
  { '@type': anyType('AsPathAttribute'), segments: [{ type: 'AS_SEQUENCE', numbers: [64512, 64513] }] },
  { '@type': anyType('LocalPrefAttribute'), localPref: 100 },
  { '@type': anyType('CommunitiesAttribute'), communities: [4_294_967_041] },
  { '@type': anyType('MultiExitDiscAttribute'), med: 5 },
];

describe.skipIf(!protosInstalled)(`path decoder (against proto-loader on the installed gobgp protos)${protosInstalled ? '' : ' (skipped: golang-github-osrg-gobgp-dev is not installed)'}`, () => {
  const { watch, list } = protosInstalled ? reference() : ({} as ReturnType<typeof reference>);

  it('reads IPv4 and IPv6 paths, withdrawals and local paths of a watch event as proto-loader does', () => {
    const v4 = podCidrPath('10.2.3.0/24', '10.0.0.2');
    const v6 = podCidrPath('fd00:2::/64', 'fd00::2');
    const paths = [
      learned({ ...v4, pattrs: [...v4.pattrs!, ...otherAttributes] }, '10.0.0.2'),
      learned(v6, 'fd00::2', { best: false }),
      learned(podCidrPath('10.9.0.0/16', '10.0.0.3'), '10.0.0.3', { isWithdraw: true }),
      { ...podCidrPath('10.1.0.0/24', '10.0.0.1'), neighborIp: '<nil>', best: true },
    ];
    const buf = watch.responseSerialize({ table: { paths } });
    const expected = (watch.responseDeserialize(buf) as { table: { paths: ApiPath[] } }).table.paths;
    const decoded = decodeWatchEvent(buf);
    expect(decoded.peer).toBeUndefined();
    expect(decoded.paths!.map(routingView)).toEqual(expected.map(routingView));
    expect(learnedBestPaths(decoded.paths!)).toEqual(learnedBestPaths(expected));
    expect(decoded.paths!.map(routingView)[1]).toMatchObject({ prefix: 'fd00:2::/64', nextHop: 'fd00::2', family: { afi: 'AFI_IP6', safi: 'SAFI_UNICAST' } });
  });

  it('reads a peer event as a peer event', () => {
    const buf = watch.responseSerialize({ peer: { type: 'STATE', peer: { conf: { neighborAddress: '10.0.0.2', peerAsn: 64512 } } } });
    expect(decodeWatchEvent(buf)).toEqual({ peer: { type: 'STATE' } });
  });

  it('reads every path of a ListPath destination', () => {
    const paths = [learned(podCidrPath('10.2.3.0/24', '10.0.0.2'), '10.0.0.2'), learned(podCidrPath('10.2.3.0/24', '10.0.0.3'), '10.0.0.3', { best: false })];
    const buf = list.responseSerialize({ destination: { prefix: '10.2.3.0/24', paths } });
    const expected = (list.responseDeserialize(buf) as { destination: { paths: ApiPath[] } }).destination.paths;
    expect(decodeListPathResponse(buf).map(routingView)).toEqual(expected.map(routingView));
  });

  it('agrees with proto-loader on any prefix, next hop and flags', () => {
    const octet = fc.integer({ min: 0, max: 255 });
    const v4 = fc.tuple(octet, octet, octet, octet).map((o) => o.join('.'));
    const v6 = fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 8, maxLength: 8 }).map((g) => g.map((x) => x.toString(16)).join(':'));
    const path = fc.oneof(
      fc.tuple(v4, fc.integer({ min: 0, max: 32 }), v4).map(([a, len, hop]) => podCidrPath(`${a}/${len}`, hop)),
      fc.tuple(v6, fc.integer({ min: 0, max: 128 }), v6).map(([a, len, hop]) => podCidrPath(`${a}/${len}`, hop)),
    );
    const entry = fc.record({ path, best: fc.boolean(), isWithdraw: fc.boolean(), neighbor: fc.oneof(v4, v6, fc.constant('<nil>')), extra: fc.boolean() });
    fc.assert(
      fc.property(fc.array(entry, { maxLength: 5 }), (entries) => {
        const paths = entries.map(({ path, best, isWithdraw, neighbor, extra }) =>
          learned(extra ? { ...path, pattrs: [...otherAttributes, ...path.pattrs!] } : path, neighbor, { best, isWithdraw }),
        );
        const buf = watch.responseSerialize({ table: { paths } });
        const expected = (watch.responseDeserialize(buf) as { table: { paths: ApiPath[] } }).table.paths;
        expect((decodeWatchEvent(buf).paths ?? []).map(routingView)).toEqual(expected.map(routingView));
      }),
      { numRuns: 200 },
    );
  });

  it('refuses a truncated or malformed message with a clear error instead of reading past it', () => {
    const buf = watch.responseSerialize({ table: { paths: [learned(podCidrPath('10.2.3.0/24', '10.0.0.2'), '10.0.0.2')] } });
    expect(() => decodeWatchEvent(buf.subarray(0, buf.length - 3))).toThrow(PathDecodeError);
    // Field 3 (table) as a varint: not the message it must be.
    expect(() => decodeWatchEvent(Uint8Array.from([0x1a, 0x05, 0x12, 0x03, 0x20, 0x01]))).toThrow(/truncated|beyond/);
    expect(() => decodeWatchEvent(Uint8Array.from([0x1a, 0x02, 0x12, 0x7f]))).toThrow(/gobgp path message: length beyond the message/);
    expect(() => decodeWatchEvent(Uint8Array.from([0x1b]))).toThrow(/wire type 3/);
  });
});
