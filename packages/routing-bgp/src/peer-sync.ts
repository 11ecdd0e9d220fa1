import { createHash } from 'node:crypto';
import type { SyncFailures } from '@kube-router/controller';
import type { Logger } from 'pino';
import type { ApiPeer, GobgpClient, PeerConfig } from './gobgp-api.js';

/** A peer one stage of the sync wants in gobgpd. */
export interface WantedPeer {
  config: PeerConfig;
  /** The failure's object when adding it fails, e.g. `peer/node-2/10.0.0.2`. */
  object: string;
  /** What the log line about it says besides the address. */
  logFields: Record<string, unknown>;
}

export interface ReconcileInput {
  client: GobgpClient;
  wanted: readonly WantedPeer[];
  /** gobgpd's peers as this sync sees them; the stage's own AddPeer and DeletePeer are recorded in it. */
  existing: PeerTable;
  failures: SyncFailures;
  /** Keep the peers no longer wanted: the wanted set may be incomplete (some input did not parse). */
  deferDeletions: boolean;
  /**
   * Addresses the other stage owns or wants (an external peer that became a Node, or the other way round): no longer
   * this stage's, they are let go without deleting the session the other stage keeps.
   */
  ownedElsewhere?: (address: string) => boolean;
}

/**
 * The gobgpd peers one stage (internal or external) added: their addresses, in the Set the rest of the controller
 * reads (the policies tell peers apart by it), and a fingerprint of the configuration each was added with, so that a
 * changed password, port, route reflector or graceful restart setting re-adds the peer. A stage touches only its own
 * peers: another stage's, or someone else's, are never deleted.
 */
export class OwnedPeers {
  readonly #fingerprints = new Map<string, string>();

  constructor(
    /** The addresses, kept equal to the fingerprints' keys. */
    readonly addresses: Set<string>,
    readonly kind: 'internal' | 'external',
    readonly logger: Logger,
  ) {}

  /** gobgpd restarted and has no peers: whatever we added is gone. */
  forget(): void {
    this.#fingerprints.clear();
    this.addresses.clear();
  }

  /**
   * Adds what is missing or configured differently, removes what is no longer wanted; returns the deferred deletions.
   * Up to PEER_CALLS_AT_ONCE peers at once (see there); each peer's own DeletePeer and AddPeer stay in order.
   */
  async reconcile(input: ReconcileInput): Promise<string[]> {
    const { client, existing, failures } = input;
    const wanted = new Map(input.wanted.map((peer) => [peer.config.neighborAddress, peer]));
    await forEachAtMost(PEER_CALLS_AT_ONCE, [...wanted.values()], ({ config, object, logFields }) => {
      const address = config.neighborAddress;
      const fingerprint = fingerprintOf(config);
      const current = existing.get(address);
      return failures.attempt(object, async () => {
        if (current && this.#fingerprints.get(address) === fingerprint) return;
        // A peer we did not add (gobgpd run by someone else, a previous agent's, the other stage's) is adopted when
        // everything ListPeer reports of it matches, password included; otherwise it is replaced.
        if (current && !this.#fingerprints.has(address) && matchesConfig(current, config)) {
          this.#own(address, fingerprint);
          return;
        }
        if (current) {
          await client.deletePeer(address);
          existing.deleted(address);
        }
        this.#fingerprints.delete(address);
        this.addresses.delete(address);
        await client.addPeer(config);
        existing.added(config);
        this.#own(address, fingerprint);
        this.logger.info({ address, asn: config.peerAsn, ...logFields }, `${current ? 'reconfigured' : 'added'} ${this.kind} BGP peer`);
      });
    });
    const gone = [...this.addresses].filter((address) => !wanted.has(address));
    if (input.deferDeletions) return gone;
    await forEachAtMost(PEER_CALLS_AT_ONCE, gone, (address) => {
      if (input.ownedElsewhere?.(address)) {
        this.#fingerprints.delete(address);
        this.addresses.delete(address);
        this.logger.info({ address }, `BGP peer is no longer ${this.kind}; its session is left to the other stage`);
        return Promise.resolve();
      }
      return failures.attempt(`peer/${address}`, async () => {
        if (existing.has(address)) {
          await client.deletePeer(address);
          existing.deleted(address);
        }
        this.#fingerprints.delete(address);
        this.addresses.delete(address);
        this.logger.info({ address }, `removed ${this.kind} BGP peer`);
      });
    });
    return [];
  }

  #own(address: string, fingerprint: string): void {
    this.#fingerprints.set(address, fingerprint);
    this.addresses.add(address);
  }
}

/**
 * What the internal and the external peer stage share: the sessions the stage owns in gobgpd, and the addresses its
 * last plan wanted (the routes learned from a peer outlive a gobgpd restart only while some stage still wants it).
 */
export abstract class PeerStage {
  readonly #owned: OwnedPeers;
  #wanted = new Set<string>();

  constructor(kind: OwnedPeers['kind'], logger: Logger) {
    this.#owned = new OwnedPeers(new Set(), kind, logger);
  }

  /** The sessions this stage added and has not yet removed (a failed deletion stays here). */
  get owned(): ReadonlySet<string> {
    return this.#owned.addresses;
  }

  /** Whether the last plan wanted a session with this address. */
  wants(address: string): boolean {
    return this.#wanted.has(address);
  }

  /** gobgpd restarted: it has no peers. */
  forget(): void {
    this.#owned.forget();
  }

  /** What the plan wants now; while the plan is `incomplete` (some input did not parse), what it wanted before too. */
  protected want(addresses: readonly string[], incomplete: boolean): void {
    this.#wanted = new Set([...addresses, ...(incomplete ? this.#wanted : [])]);
  }

  protected get wanted(): ReadonlySet<string> {
    return this.#wanted;
  }

  /** Reconciles against gobgpd's peer table as this sync sees it; returns the deferred deletions. */
  protected reconcile(client: GobgpClient, input: Omit<ReconcileInput, 'client'>): Promise<string[]> {
    return this.#owned.reconcile({ ...input, client });
  }
}

/**
 * gobgpd's peers as one sync sees them: listed once, then kept current with the sync's own AddPeer and DeletePeer, so
 * both peer stages and the policies after them see the table as it is after every change without listing it again.
 * ListPeer grows with the mesh (16 ms at 10 peers, 180-385 ms at 300) and gobgpd answers it in the loop that also runs
 * its sessions; listed for each of them it was 3-4 listings a sync. A peer added by someone else (gobgp's CLI) during
 * the sync is seen by the next one.
 */
export class PeerTable {
  readonly #peers: Map<string, ApiPeer>;

  constructor(peers: Iterable<ApiPeer>) {
    this.#peers = new Map([...peers].map((peer) => [peer.conf?.neighborAddress ?? '', peer]));
    this.#peers.delete('');
  }

  static async list(client: Pick<GobgpClient, 'listPeers'>): Promise<PeerTable> {
    return new PeerTable(await client.listPeers());
  }

  get(address: string): ApiPeer | undefined {
    return this.#peers.get(address);
  }

  has(address: string): boolean {
    return this.#peers.has(address);
  }

  /** Every peer's neighbor address. */
  get addresses(): string[] {
    return [...this.#peers.keys()];
  }

  /** gobgpd took AddPeer: the peer as ListPeer reports a configured one (its session state is not known yet). */
  added(config: PeerConfig): void {
    this.#peers.set(config.neighborAddress, asListed(config));
  }

  deleted(address: string): void {
    this.#peers.delete(address);
  }
}

/** What ListPeer reports of a peer added with `config`: every field `matchesConfig` compares. */
export function asListed(config: PeerConfig): ApiPeer {
  return {
    conf: { neighborAddress: config.neighborAddress, peerAsn: config.peerAsn, authPassword: config.password ?? '' },
    transport: { remotePort: config.remotePort, passiveMode: config.passive ?? false, ...(config.localAddress && { localAddress: config.localAddress }) },
    timers: { config: { holdTime: config.holdTimeSeconds } },
    ...(config.ebgpMultihopTtl !== undefined && config.ebgpMultihopTtl > 1 && { ebgpMultihop: { enabled: true, multihopTtl: config.ebgpMultihopTtl } }),
    ...(config.routeReflectorClient && {
      routeReflector: { routeReflectorClient: true, routeReflectorClusterId: config.routeReflectorClient.clusterId },
    }),
    ...(config.gracefulRestart && {
      gracefulRestart: { enabled: true, restartTime: config.gracefulRestart.restartTimeSeconds, deferralTime: config.gracefulRestart.deferralTimeSeconds },
    }),
    afiSafis: config.families.map((afi) => ({ config: { family: { afi, safi: 'SAFI_UNICAST' }, enabled: true } })),
  };
}

/**
 * Peer calls (AddPeer, DeletePeer) one stage has in flight at once. gobgpd applies them one at a time in its main
 * loop, which also runs every session and answers ListPeer: one after another, a 300-node mesh's first sync added 3-5
 * peers a second, each waiting out its own round trip and whatever held that loop. A few in flight keep the loop fed;
 * the bound keeps a large change from queueing hundreds of calls there, each counting against its own call timeout.
 */
export const PEER_CALLS_AT_ONCE = 8;

/**
 * Runs `step` for every item, at most `limit` at once, in the items' order; `step` reports its own failures. Should a
 * step throw all the same, no further step starts, and the error is thrown once those in flight have ended: nothing
 * is still calling gobgpd after the stage returned.
 */
export async function forEachAtMost<T>(limit: number, items: readonly T[], step: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (!failed && next < items.length) {
      try {
        await step(items[next++]!);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  const outcomes = await Promise.allSettled(Array.from({ length: Math.min(limit, items.length) }, worker));
  const rejected = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
  if (rejected) throw rejected.reason;
}

/** A digest, not the configuration itself: the fingerprints hold passwords otherwise. */
function fingerprintOf(config: PeerConfig): string {
  const canonical = JSON.stringify(config, (_key, value: unknown) =>
    value && typeof value === 'object' && !Array.isArray(value)
      ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => a.localeCompare(b)))
      : value,
  );
  return createHash('sha256').update(canonical).digest('hex');
}

/**
 * Whether a peer in gobgpd is configured as `config` asks, by what ListPeer reports (gobgpd shows the password too).
 * The local address is compared only when both name one: ListPeer reports the socket's address once connected.
 */
export function matchesConfig(peer: ApiPeer, config: PeerConfig): boolean {
  const families = (peer.afiSafis ?? [])
    .filter((f) => f.config?.enabled !== false && f.config?.family?.safi === 'SAFI_UNICAST')
    .map((f) => f.config?.family?.afi ?? '')
    .sort();
  const multihopTtl = peer.ebgpMultihop?.enabled ? (peer.ebgpMultihop.multihopTtl ?? 0) : 0;
  const reportedClusterId = peer.routeReflector?.routeReflectorClusterId ?? '';
  const graceful = peer.gracefulRestart;
  return (
    peer.conf?.peerAsn === config.peerAsn &&
    (peer.conf?.authPassword ?? '') === (config.password ?? '') &&
    (peer.transport?.remotePort ?? config.remotePort) === config.remotePort &&
    (!config.localAddress || !peer.transport?.localAddress || peer.transport.localAddress === config.localAddress) &&
    Boolean(peer.transport?.passiveMode) === Boolean(config.passive) &&
    (peer.timers?.config?.holdTime ?? config.holdTimeSeconds) === config.holdTimeSeconds &&
    multihopTtl === (config.ebgpMultihopTtl !== undefined && config.ebgpMultihopTtl > 1 ? config.ebgpMultihopTtl : 0) &&
    families.join() === [...config.families].sort().join() &&
    Boolean(peer.routeReflector?.routeReflectorClient) === Boolean(config.routeReflectorClient) &&
    (!config.routeReflectorClient || reportedClusterId === '' || reportedClusterId === config.routeReflectorClient.clusterId) &&
    Boolean(graceful?.enabled) === Boolean(config.gracefulRestart) &&
    (!config.gracefulRestart ||
      ((graceful?.restartTime ?? 0) === config.gracefulRestart.restartTimeSeconds &&
        (graceful?.deferralTime ?? 0) === config.gracefulRestart.deferralTimeSeconds))
  );
}
