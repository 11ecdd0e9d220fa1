import { counterOn, gaugeOn, histogramOn } from '@kube-router/metrics';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ApiPeer } from './gobgp-api.js';

/** kube-router's routing metrics, under their kube-router names, in the agent's registry. */
export interface RoutingMetrics {
  routesSyncTime: Histogram;
  peerInfo: Gauge<'address' | 'type' | 'asn' | 'state'>;
  internalPeersSyncTime: Histogram;
  advertisementsReceived: Counter;
  advertisementsSent: Counter<'type'>;
}

const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export function createRoutingMetrics(registry: Registry): RoutingMetrics {
  // One agent registers them once; a second controller in the same registry (tests) reuses them.
  return {
    routesSyncTime: histogramOn(registry, {
      name: 'kube_router_controller_routes_sync_time',
      help: 'Time it took for controller to sync routes',
      buckets: SECONDS_BUCKETS,
    }),
    peerInfo: gaugeOn(registry, { name: 'kube_router_bgp_peer_info', help: 'BGP peer information', labelNames: ['address', 'type', 'asn', 'state'] }),
    internalPeersSyncTime: histogramOn(registry, {
      name: 'kube_router_controller_bgp_internal_peers_sync_time',
      help: 'Time it took to sync internal bgp peers',
      buckets: SECONDS_BUCKETS,
    }),
    advertisementsReceived: counterOn(registry, { name: 'kube_router_controller_bgp_advertisements_received', help: 'BGP advertisements received' }),
    advertisementsSent: counterOn(registry, { name: 'kube_router_controller_bgp_advertisements_sent', help: 'BGP advertisements sent', labelNames: ['type'] }),
  };
}

/**
 * kube_router_bgp_peer_info, one series per peer gobgpd has now (reset first: a removed peer's series goes). gobgpd
 * reports the type only once a session is up; until then a mesh session counts as internal.
 */
export function reportPeerInfo(peerInfo: RoutingMetrics['peerInfo'], peers: readonly ApiPeer[], isInternal: (address: string) => boolean): void {
  peerInfo.reset();
  for (const peer of peers) {
    const address = peer.conf?.neighborAddress ?? peer.state?.neighborAddress ?? '';
    peerInfo.set(
      {
        address,
        type: (peer.state?.type ?? '').replace(/^PEER_TYPE_/, '').toLowerCase() || (isInternal(address) ? 'internal' : 'unknown'),
        asn: String(peer.conf?.peerAsn ?? peer.state?.peerAsn ?? 0),
        state: (peer.state?.sessionState ?? 'UNKNOWN').replace(/^SESSION_STATE_/, '').toLowerCase(),
      },
      1,
    );
  }
}

/**
 * kube_router_bgp_peer_info kept current from gobgpd's ListPeer, one listing at a time: whoever asks while one runs
 * shares the single listing queued behind it, which starts after the ask and so reports what the asker changed or saw
 * change. The metric shows the sessions' live states, so it takes a listing of its own rather than a sync's PeerTable;
 * but every peer state event asks for one, and a mesh coming up sends one per peer and FSM step (idle, active,
 * opensent, openconfirm, established: some 1,200 for 300 nodes), each of which was a ListPeer of its own, all at once.
 */
export class PeerInfoRefresh {
  #running: Promise<void> | undefined;
  #queued: Promise<void> | undefined;

  constructor(
    private readonly peerInfo: RoutingMetrics['peerInfo'],
    private readonly listPeers: () => Promise<readonly ApiPeer[]>,
    private readonly isInternal: (address: string) => boolean,
  ) {}

  /** Resolves once a listing that began after this call has been reported; rejects with that listing's failure. */
  request(): Promise<void> {
    if (this.#queued) return this.#queued;
    if (!this.#running) return this.#start();
    const queued = this.#running
      .catch(() => undefined)
      .then(() => {
        this.#queued = undefined;
        return this.#start();
      });
    this.#queued = queued;
    return queued;
  }

  #start(): Promise<void> {
    const run = (async () => reportPeerInfo(this.peerInfo, await this.listPeers(), this.isInternal))().finally(() => {
      if (this.#running === run) this.#running = undefined;
    });
    this.#running = run;
    return run;
  }
}
