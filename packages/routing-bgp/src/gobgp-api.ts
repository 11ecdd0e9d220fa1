import { existsSync } from 'node:fs';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { decodeListPathResponse, decodeWatchEvent, type WatchEvent } from './path-decoder.js';

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

/** A peer as ListPeer reports it: its configuration (the TCP MD5 password included) and its state. */
export interface ApiPeer {
  conf?: { neighborAddress?: string; peerAsn?: number; localAsn?: number; authPassword?: string };
  state?: { neighborAddress?: string; peerAsn?: number; type?: string; sessionState?: string; flops?: number };
  transport?: { localAddress?: string; remotePort?: number; passiveMode?: boolean };
  timers?: { config?: { holdTime?: number } };
  ebgpMultihop?: { enabled?: boolean; multihopTtl?: number };
  gracefulRestart?: { enabled?: boolean; restartTime?: number; deferralTime?: number; peerRestarting?: boolean; localRestarting?: boolean };
  routeReflector?: { routeReflectorClient?: boolean; routeReflectorClusterId?: string };
  afiSafis?: { config?: { family?: { afi?: string; safi?: string }; enabled?: boolean } }[];
}

export interface GlobalConfig {
  asn: number;
  routerId: string;
  /** -1 makes gobgpd listen nowhere (it only dials out). */
  listenPort: number;
  listenAddresses?: string[];
  gracefulRestart?: GracefulRestartConfig;
}

/** RFC 4724 graceful restart, as kube-router sets it on every peer with --bgp-graceful-restart. */
export interface GracefulRestartConfig {
  /** Seconds a peer keeps our routes after the session drops (the capability's Restart Time, at most 4095). */
  restartTimeSeconds: number;
  /** Seconds a restarted gobgpd waits for its peers' End-of-RIB before it selects and sends best paths. */
  deferralTimeSeconds: number;
}

export interface PeerConfig {
  neighborAddress: string;
  peerAsn: number;
  localAddress?: string;
  remotePort: number;
  holdTimeSeconds: number;
  families: readonly Afi[];
  /** TCP MD5 (RFC 2385) password, clear text. */
  password?: string;
  /** eBGP multihop: the TTL of this session's packets (only for a TTL above 1). */
  ebgpMultihopTtl?: number;
  /** This node reflects the peer's routes to its other peers (it is our route reflector client) in this cluster. */
  routeReflectorClient?: { clusterId: string };
  gracefulRestart?: GracefulRestartConfig;
  /** Never dial: wait for the peer to connect. */
  passive?: boolean;
}

export type DefinedType = 'PREFIX' | 'NEIGHBOR';
export type RouteAction = 'NONE' | 'ACCEPT' | 'REJECT';
export type PolicyDirection = 'IMPORT' | 'EXPORT';

/** A gobgp defined set: prefixes for PREFIX, `address/len` entries in `list` for NEIGHBOR. */
export interface DefinedSet {
  definedType: DefinedType;
  name: string;
  list?: string[];
  prefixes?: { ipPrefix: string; maskLengthMin: number; maskLengthMax: number }[];
}

export interface MatchSet {
  type: 'ANY' | 'ALL' | 'INVERT';
  name: string;
}

export interface PolicyStatement {
  name: string;
  conditions: { prefixSet?: MatchSet; neighborSet?: MatchSet };
  actions: {
    routeAction: RouteAction;
    community?: { type: 'ADD' | 'REMOVE' | 'REPLACE'; communities: string[] };
    asPrepend?: { asn: number; repeat: number; useLeftMost?: boolean };
    nexthop?: { self?: boolean; address?: string };
  };
}

export interface Policy {
  name: string;
  statements: PolicyStatement[];
}

export interface RoutingPolicy {
  definedSets: DefinedSet[];
  policies: Policy[];
}

export interface PolicyAssignment {
  name: string;
  direction: PolicyDirection | (string & {});
  policies?: { name: string }[];
  defaultAction?: RouteAction;
}

export interface WatchHandlers {
  onPaths(paths: ApiPath[]): void;
  /**
   * The stream's first table event: gobgpd's whole table of best paths when the stream opened (empty if it has none),
   * in one message. Without this handler it goes to onPaths.
   */
  onSnapshot?(paths: ApiPath[]): void;
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
type ClientStreamMethod = (options: grpc.CallOptions, callback: (error: grpc.ServiceError | null) => void) => grpc.ClientWritableStream<unknown>;

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
  readonly #api: grpc.ServiceClientConstructor;
  readonly #client: grpc.Client;
  readonly #callTimeoutMs: number;

  constructor(options: GobgpClientOptions) {
    const Api = loadGobgpApi(options.protoDir);
    this.target = options.target;
    this.#api = Api;
    this.#client = new Api(options.target, grpc.credentials.createInsecure(), {
      // A restarted gobgpd must be found again quickly: grpc's default reconnect backoff reaches two minutes.
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 1_000,
      // A watch opens with the whole table of best paths in one message: 5,000 routes are 1.5 MB, and grpc's default
      // limit of 4 MB would refuse a large table's, again on every attempt.
      'grpc.max_receive_message_length': -1,
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
    const { gracefulRestart, ...rest } = global;
    return this.#unary('startBgp', {
      global: { ...rest, ...(gracefulRestart && { gracefulRestart: gracefulRestartMessage(gracefulRestart) }) },
    });
  }

  async getBgp(): Promise<{ asn: number; routerId: string } | undefined> {
    const response = (await this.#unary('getBgp', {})) as { global?: { asn: number; routerId: string } };
    return response.global;
  }

  addPeer(peer: PeerConfig): Promise<unknown> {
    return this.#unary('addPeer', {
      peer: {
        conf: { neighborAddress: peer.neighborAddress, peerAsn: peer.peerAsn, ...(peer.password && { authPassword: peer.password }) },
        transport: {
          remotePort: peer.remotePort,
          ...(peer.localAddress && { localAddress: peer.localAddress }),
          ...(peer.passive && { passiveMode: true }),
        },
        timers: {
          config: {
            holdTime: peer.holdTimeSeconds,
            keepaliveInterval: Math.max(1, Math.floor(peer.holdTimeSeconds / 3)),
            // gobgpd's default of 120 s between dials would keep a peer that restarted down for minutes.
            connectRetry: PEER_CONNECT_RETRY_SECONDS,
          },
        },
        ...(peer.ebgpMultihopTtl !== undefined && peer.ebgpMultihopTtl > 1 && {
          ebgpMultihop: { enabled: true, multihopTtl: peer.ebgpMultihopTtl },
        }),
        ...(peer.routeReflectorClient && {
          routeReflector: { routeReflectorClient: true, routeReflectorClusterId: peer.routeReflectorClient.clusterId },
        }),
        // kube-router's settings: this speaker restarts (the R bit: peers keep its routes while it is away) and defers
        // its best-path selection until every peer sent End-of-RIB, per family.
        ...(peer.gracefulRestart && { gracefulRestart: { ...gracefulRestartMessage(peer.gracefulRestart), localRestarting: true } }),
        afiSafis: peer.families.map((afi) => ({
          config: { family: { afi, safi: 'SAFI_UNICAST' }, enabled: true },
          ...(peer.gracefulRestart && { mpGracefulRestart: { config: { enabled: true } } }),
        })),
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

  /**
   * Every path of the global RIB in one family (best and not), with only the fields routing reads (see
   * path-decoder.ts): a fifth of the time of {@link listGlobalPaths} for a large RIB. Not for a path handed back to
   * gobgpd (deletePath), whose other attributes it lacks.
   */
  async listRoutingPaths(afi: Afi): Promise<ApiPath[]> {
    const batches = await this.#leanList('ListPath', { tableType: 'GLOBAL', family: { afi, safi: 'SAFI_UNICAST' } }, decodeListPathResponse);
    return batches.flat();
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
   * Streams the global RIB's best paths (the whole table, then each change) and peer state changes. The stream ends
   * (with an error) when gobgpd goes away; the caller watches again once it is back. The returned function cancels it.
   */
  watchEvents(handlers: WatchHandlers): () => void {
    const { onPaths, onSnapshot, onPeerChange, onEnd } = handlers;
    // Decoded by path-decoder.ts: a peer's burst arrives as one event per path, thousands within a second.
    const stream = this.#client.makeServerStreamRequest(
      this.#api.service.WatchEvent!.path,
      this.#api.service.WatchEvent!.requestSerialize,
      decodeWatchEvent,
      { peer: {}, table: { filters: [{ type: 'BEST', init: true }] } },
      {},
    );
    let ended = false;
    // gobgpd sends its table first (after the peers' INIT events), then one event per changed destination.
    let snapshotSeen = false;
    const end = (error?: Error) => {
      if (ended) return;
      ended = true;
      onEnd(error);
    };
    stream.on('data', (event: WatchEvent) => {
      // Cancelled: what grpc-js still had buffered is older than whatever replaces this stream.
      if (ended) return;
      if (event.paths && !snapshotSeen) {
        snapshotSeen = true;
        if (onSnapshot) onSnapshot(event.paths);
        else if (event.paths.length) onPaths(event.paths);
      } else if (event.paths?.length) onPaths(event.paths);
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

  /** A server-streaming call whose responses `decode` reads (path-decoder.ts), with the call deadline. */
  #leanList<T>(method: string, request: unknown, decode: (buf: Buffer) => T): Promise<T[]> {
    const definition = this.#api.service[method]!;
    return new Promise((resolve, reject) => {
      const items: T[] = [];
      const stream = this.#client.makeServerStreamRequest(definition.path, definition.requestSerialize, decode, request, {
        deadline: Date.now() + this.#callTimeoutMs,
      });
      stream.on('data', (item: T) => items.push(item));
      stream.on('error', (error: grpc.ServiceError) => reject(gobgpError(method, this.target, error)));
      stream.on('end', () => resolve(items));
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

  // Routing policy: kube-router's defined sets, statements and policies, assigned to the global RIB.

  /**
   * Replaces gobgpd's whole routing policy (every defined set and policy) in one call. Assignments are kept by
   * policy name, so policies whose names stay the same stay assigned.
   */
  setPolicies(policy: RoutingPolicy): Promise<unknown> {
    return this.#unary('setPolicies', { definedSets: policy.definedSets, policies: policy.policies });
  }

  /** The policies assigned to the global RIB in one direction, with its default action. */
  async getGlobalPolicyAssignment(direction: PolicyDirection): Promise<PolicyAssignment | undefined> {
    const items = await this.#list<{ assignment?: PolicyAssignment }>('listPolicyAssignment', { name: 'global', direction });
    return items.map((i) => i.assignment).find((a) => a?.direction === direction);
  }

  /** Assigns exactly these policies (by name) to the global RIB in one direction, replacing what was assigned. */
  setGlobalPolicyAssignment(direction: PolicyDirection, policyNames: readonly string[], defaultAction: RouteAction): Promise<unknown> {
    return this.#unary('setPolicyAssignment', {
      assignment: { name: 'global', direction, policies: policyNames.map((name) => ({ name })), defaultAction },
    });
  }

  /**
   * Re-applies the policies to what was already exchanged with every established peer: `out` re-sends the best paths
   * through the export policy, `in` re-evaluates what peers sent through the import policy. gobgpd applies a policy
   * change only to paths that change afterwards, so without this a new peer set would not reach existing sessions.
   */
  softResetAllPeers(direction: 'IN' | 'OUT' | 'BOTH'): Promise<unknown> {
    return this.#unary('resetPeer', { address: 'all', soft: true, direction });
  }

  /**
   * Adds (or, with `isWithdraw`, withdraws) many paths of the global RIB over one AddPathStream call: a thousand in
   * about a fifth of the time of a thousand AddPath calls. All or nothing: gobgpd checks every path before it adds
   * any, and one bad path fails the call without naming it.
   */
  addPathsInBulk(paths: readonly ApiPath[]): Promise<void> {
    const method = (this.#client as unknown as Record<string, ClientStreamMethod>).addPathStream!.bind(this.#client);
    return new Promise((resolve, reject) => {
      const call = method({ deadline: Date.now() + this.#callTimeoutMs }, (error) =>
        error ? reject(gobgpError('addPathStream', this.target, error)) : resolve(),
      );
      for (let i = 0; i < paths.length; i += BULK_PATHS_PER_MESSAGE) {
        call.write({ tableType: 'GLOBAL', paths: paths.slice(i, i + BULK_PATHS_PER_MESSAGE) });
      }
      call.end();
    });
  }
}

/** Paths per AddPathStream message: far below gRPC's 4 MiB message limit (a path is about 100 bytes). */
const BULK_PATHS_PER_MESSAGE = 1_000;

function gracefulRestartMessage(config: GracefulRestartConfig): Record<string, unknown> {
  return { enabled: true, restartTime: config.restartTimeSeconds, deferralTime: config.deferralTimeSeconds };
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
