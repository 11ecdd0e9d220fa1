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
  /** gobgpd's peers by neighbor address, as listed at the start of this sync. */
  existing: ReadonlyMap<string, ApiPeer>;
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

  /** Adds what is missing or configured differently, removes what is no longer wanted; returns the deferred deletions. */
  async reconcile(input: ReconcileInput): Promise<string[]> {
    const { client, existing, failures } = input;
    const wanted = new Map(input.wanted.map((peer) => [peer.config.neighborAddress, peer]));
    for (const { config, object, logFields } of wanted.values()) {
      const address = config.neighborAddress;
      const fingerprint = fingerprintOf(config);
      const current = existing.get(address);
      await failures.attempt(object, async () => {
        if (current && this.#fingerprints.get(address) === fingerprint) return;
        // A peer we did not add (gobgpd run by someone else, a previous agent's, the other stage's) is adopted when
        // everything ListPeer reports of it matches, password included; otherwise it is replaced.
        if (current && !this.#fingerprints.has(address) && matchesConfig(current, config)) {
          this.#own(address, fingerprint);
          return;
        }
        if (current) await client.deletePeer(address);
        this.#fingerprints.delete(address);
        this.addresses.delete(address);
        await client.addPeer(config);
        this.#own(address, fingerprint);
        this.logger.info({ address, asn: config.peerAsn, ...logFields }, `${current ? 'reconfigured' : 'added'} ${this.kind} BGP peer`);
      });
    }
    const gone = [...this.addresses].filter((address) => !wanted.has(address));
    if (input.deferDeletions) return gone;
    for (const address of gone) {
      if (input.ownedElsewhere?.(address)) {
        this.#fingerprints.delete(address);
        this.addresses.delete(address);
        this.logger.info({ address }, `BGP peer is no longer ${this.kind}; its session is left to the other stage`);
        continue;
      }
      await failures.attempt(`peer/${address}`, async () => {
        if (existing.has(address)) await client.deletePeer(address);
        this.#fingerprints.delete(address);
        this.addresses.delete(address);
        this.logger.info({ address }, `removed ${this.kind} BGP peer`);
      });
    }
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

  /** Reconciles against gobgpd's peer table as it is now; returns the deferred deletions. */
  protected async reconcile(client: GobgpClient, input: Omit<ReconcileInput, 'client' | 'existing'>): Promise<string[]> {
    const existing = new Map((await client.listPeers()).map((peer) => [peer.conf?.neighborAddress ?? '', peer]));
    return this.#owned.reconcile({ ...input, client, existing });
  }
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
