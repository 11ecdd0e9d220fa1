import { existsSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** Where Debian's golang-github-osrg-gobgp-dev installs gobgp's API protos. */
export const DEFAULT_GOBGP_PROTO_DIR = '/usr/share/gocode/src/github.com/osrg/gobgp/api';

/** Seconds between a peer's connection attempts. */
export const PEER_CONNECT_RETRY_SECONDS = 5;

const PROTO_FILES = ['gobgp.proto', 'attribute.proto', 'capability.proto'] as const;

/** google.protobuf.Any as proto-loader's `json` option renders it: the type URL plus the message's own fields. */
export interface AnyMessage {
  '@type': string;
  [field: string]: unknown;
}

export const anyType = (message: string): string => `type.googleapis.com/apipb.${message}`;

export type Afi = 'AFI_IP' | 'AFI_IP6';
export interface Family {
  afi: Afi | (string & {});
  safi: 'SAFI_UNICAST' | (string & {});
}

export interface ApiPath {
  family?: Family;
  nlri?: AnyMessage;
  pattrs?: AnyMessage[];
  best?: boolean;
  isWithdraw?: boolean;
  /** `<nil>` for a path this speaker originated. */
  neighborIp?: string;
  sourceId?: string;
}

export interface ApiPeer {
  conf?: { neighborAddress?: string; peerAsn?: number; localAsn?: number };
  state?: { neighborAddress?: string; peerAsn?: number; type?: string; sessionState?: string };
  transport?: { localAddress?: string; remotePort?: number };
}

export interface GlobalConfig {
  asn: number;
  routerId: string;
  /** -1 makes gobgpd listen nowhere (it only dials out). */
  listenPort: number;
  listenAddresses?: string[];
}

export interface PeerConfig {
  neighborAddress: string;
  peerAsn: number;
  localAddress?: string;
  remotePort: number;
  holdTimeSeconds: number;
  families: readonly Afi[];
}

export interface WatchHandlers {
  onPaths(paths: ApiPath[]): void;
  onPeerChange(): void;
  onEnd(error?: Error): void;
}

export interface GobgpClientOptions {
  /** `host:port` or `unix:///path/to/socket`. */
  target: string;
  protoDir?: string;
  /** Deadline of every unary call and of every listing. Default 10 s. */
  callTimeoutMs?: number;
}

type UnaryMethod = (request: unknown, options: grpc.CallOptions, callback: (error: grpc.ServiceError | null, response: unknown) => void) => grpc.ClientUnaryCall;
type StreamMethod = (request: unknown, options: grpc.CallOptions) => grpc.ClientReadableStream<unknown>;

let cachedDefinition: { dir: string; api: grpc.ServiceClientConstructor } | undefined;

/**
 * Loads gobgp's API from the protos Debian ships, at run time: they are never copied into this repository, so the
 * client always speaks the installed gobgpd's version of the API.
 */
export function loadGobgpApi(protoDir = DEFAULT_GOBGP_PROTO_DIR): grpc.ServiceClientConstructor {
  if (cachedDefinition?.dir === protoDir) return cachedDefinition.api;
  const missing = PROTO_FILES.filter((file) => !existsSync(join(protoDir, file)));
  if (missing.length > 0) {
    throw new Error(
      `gobgp API protos not found: ${missing.join(', ')} missing in ${protoDir}; install Debian's ` +
        'golang-github-osrg-gobgp-dev or set the plugin option protoDir to the directory holding gobgp.proto',
    );
  }
  const definition = protoLoader.loadSync([...PROTO_FILES], {
    includeDirs: [protoDir],
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
    // Decodes google.protobuf.Any into `{ '@type', ...fields }` and encodes it back: NLRIs and path attributes.
    json: true,
  });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as { apipb: { GobgpApi: grpc.ServiceClientConstructor } };
  cachedDefinition = { dir: protoDir, api: loaded.apipb.GobgpApi };
  return loaded.apipb.GobgpApi;
}

/** A thin promise-based client of the few gobgp API calls the routing controller makes; every call has a deadline. */
export class GobgpClient {
  readonly target: string;
  readonly #client: grpc.Client;
  readonly #callTimeoutMs: number;

  constructor(options: GobgpClientOptions) {
    const Api = loadGobgpApi(options.protoDir);
    this.target = options.target;
    this.#client = new Api(options.target, grpc.credentials.createInsecure(), {
      // A restarted gobgpd must be found again quickly: grpc's default reconnect backoff reaches two minutes.
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 1_000,
    });
    this.#callTimeoutMs = options.callTimeoutMs ?? 10_000;
  }

  close(): void {
    this.#client.close();
  }

  /** Resolves once the API answers; rejects after `timeoutMs`. */
  async waitReady(timeoutMs: number): Promise<void> {
    await new Promise<void>((resolve, reject) =>
      this.#client.waitForReady(Date.now() + timeoutMs, (error) => (error ? reject(error) : resolve())),
    );
    await this.getBgp();
  }

  startBgp(global: GlobalConfig): Promise<unknown> {
    return this.#unary('startBgp', { global });
  }

  async getBgp(): Promise<{ asn: number; routerId: string } | undefined> {
    const response = (await this.#unary('getBgp', {})) as { global?: { asn: number; routerId: string } };
    return response.global;
  }

  addPeer(peer: PeerConfig): Promise<unknown> {
    return this.#unary('addPeer', {
      peer: {
        conf: { neighborAddress: peer.neighborAddress, peerAsn: peer.peerAsn },
        transport: { remotePort: peer.remotePort, ...(peer.localAddress && { localAddress: peer.localAddress }) },
        timers: {
          config: {
            holdTime: peer.holdTimeSeconds,
            keepaliveInterval: Math.max(1, Math.floor(peer.holdTimeSeconds / 3)),
            // gobgpd's default of 120 s between dials would keep a peer that restarted down for minutes.
            connectRetry: PEER_CONNECT_RETRY_SECONDS,
          },
        },
        afiSafis: peer.families.map((afi) => ({ config: { family: { afi, safi: 'SAFI_UNICAST' }, enabled: true } })),
      },
    });
  }

  deletePeer(address: string): Promise<unknown> {
    return this.#unary('deletePeer', { address });
  }

  listPeers(): Promise<ApiPeer[]> {
    return this.#list<{ peer: ApiPeer }>('listPeer', { enableAdvertised: false }).then((items) => items.map((i) => i.peer));
  }

  addPath(path: ApiPath): Promise<unknown> {
    return this.#unary('addPath', { tableType: 'GLOBAL', path });
  }

  deletePath(path: ApiPath): Promise<unknown> {
    return this.#unary('deletePath', { tableType: 'GLOBAL', family: path.family, path });
  }

  /** Every path of the global RIB in one family (best and not). */
  async listGlobalPaths(afi: Afi): Promise<ApiPath[]> {
    const destinations = await this.#list<{ destination?: { paths?: ApiPath[] } }>('listPath', {
      tableType: 'GLOBAL',
      family: { afi, safi: 'SAFI_UNICAST' },
    });
    return destinations.flatMap((d) => d.destination?.paths ?? []);
  }

  /**
   * Streams best-path changes of the global RIB and peer state changes. The stream ends (with an error) when gobgpd
   * goes away; the caller watches again once it is back. The returned function cancels it.
   */
  watchEvents(handlers: WatchHandlers): () => void {
    const { onPaths, onPeerChange, onEnd } = handlers;
    const method = (this.#client as unknown as Record<string, StreamMethod>).watchEvent!.bind(this.#client);
    const stream = method({ peer: {}, table: { filters: [{ type: 'BEST', init: true }] } }, {});
    let ended = false;
    const end = (error?: Error) => {
      if (ended) return;
      ended = true;
      onEnd(error);
    };
    stream.on('data', (event: { table?: { paths?: ApiPath[] }; peer?: { type?: string } }) => {
      if (event.table?.paths?.length) onPaths(event.table.paths);
      if (event.peer?.type === 'STATE') onPeerChange();
    });
    stream.on('error', (error: Error) => end(error));
    stream.on('end', () => end());
    return () => {
      ended = true;
      stream.cancel();
    };
  }

  #unary(name: string, request: unknown): Promise<unknown> {
    const method = (this.#client as unknown as Record<string, UnaryMethod>)[name]!.bind(this.#client);
    return new Promise((resolve, reject) => {
      method(request, { deadline: Date.now() + this.#callTimeoutMs }, (error, response) =>
        error ? reject(gobgpError(name, this.target, error)) : resolve(response),
      );
    });
  }

  #list<T>(name: string, request: unknown): Promise<T[]> {
    const method = (this.#client as unknown as Record<string, StreamMethod>)[name]!.bind(this.#client);
    return new Promise((resolve, reject) => {
      const items: T[] = [];
      const stream = method(request, { deadline: Date.now() + this.#callTimeoutMs });
      stream.on('data', (item: T) => items.push(item));
      stream.on('error', (error: grpc.ServiceError) => reject(gobgpError(name, this.target, error)));
      stream.on('end', () => resolve(items));
    });
  }
}

/** A gobgp API call failed: the message names the call, the target and gRPC's reason. */
export class GobgpApiError extends Error {
  readonly code: grpc.status | undefined;
  constructor(call: string, target: string, cause: grpc.ServiceError) {
    super(`gobgp ${call} at ${target}: ${cause.details || cause.message}`, { cause });
    this.name = 'GobgpApiError';
    this.code = cause.code;
  }
}

function gobgpError(call: string, target: string, error: grpc.ServiceError): GobgpApiError {
  return new GobgpApiError(call, target, error);
}
