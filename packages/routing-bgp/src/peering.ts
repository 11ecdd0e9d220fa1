import type { V1Node } from '@kubernetes/client-node';
import type { PlannedExternalPeer } from './external-peers.js';
import type { GracefulRestartConfig } from './gobgp-api.js';
import type { DesiredPeer } from './nodes.js';
import type { WantedPeer } from './peer-sync.js';
import { isReflector, isReflectorClient, type ReflectorRole } from './route-reflector.js';

/** What every peer of this node shares. */
export interface PeeringSettings {
  /** --bgp-port: the mesh's port (external peers have their own, default 179). */
  bgpPort: number;
  holdTimeSeconds: number;
  /** --bgp-graceful-restart and its times; undefined when off. */
  gracefulRestart?: GracefulRestartConfig;
  /** --peer-router-multihop-ttl: external peers only, and only above 1 (kube-router). */
  peerMultihopTtl: number;
}

/**
 * The mesh's peers with route reflection applied, as kube-router's syncInternalPeers: a route reflector client
 * (kube-router.io/rr.client on this Node) peers only with reflectors (kube-router.io/rr.server); a reflector marks its
 * clients' sessions as route reflector clients in its cluster; everyone else peers with everyone.
 */
export function internalPeerConfigs(input: {
  peers: readonly DesiredPeer[];
  role: ReflectorRole;
  nodeOf: (name: string) => V1Node | undefined;
  localAddress: string;
  settings: PeeringSettings;
}): { wanted: WantedPeer[]; skipped: { node: string; reason: string }[] } {
  const { role, settings } = input;
  const wanted: WantedPeer[] = [];
  const skipped: { node: string; reason: string }[] = [];
  for (const peer of input.peers) {
    const node = input.nodeOf(peer.node);
    if (role.kind === 'client' && !(node && isReflector(node))) {
      skipped.push({ node: peer.node, reason: 'this node is a route reflector client and that node is no route reflector' });
      continue;
    }
    const reflectsFor = role.kind === 'server' && node !== undefined && isReflectorClient(node);
    wanted.push({
      config: {
        neighborAddress: peer.address,
        peerAsn: peer.asn,
        // The address the other node has us as its neighbor: with several interfaces gobgpd would pick another.
        localAddress: input.localAddress,
        remotePort: settings.bgpPort,
        holdTimeSeconds: settings.holdTimeSeconds,
        families: peer.families,
        ...(reflectsFor && { routeReflectorClient: { clusterId: role.clusterId } }),
        ...(settings.gracefulRestart && { gracefulRestart: settings.gracefulRestart }),
      },
      object: `peer/${peer.node}/${peer.address}`,
      logFields: { node: peer.node, ...(reflectsFor && { routeReflectorClient: true }) },
    });
  }
  return { wanted, skipped };
}

/** The external peers' gobgpd configuration: password (TCP MD5), port, local address, multihop, graceful restart. */
export function externalPeerConfigs(peers: readonly PlannedExternalPeer[], settings: PeeringSettings): WantedPeer[] {
  return peers.map((peer) => ({
    config: {
      neighborAddress: peer.address,
      peerAsn: peer.asn,
      localAddress: peer.localAddress,
      remotePort: peer.port,
      holdTimeSeconds: settings.holdTimeSeconds,
      families: peer.families,
      ...(peer.password !== undefined && peer.password !== '' && { password: peer.password }),
      ...(settings.peerMultihopTtl > 1 && { ebgpMultihopTtl: settings.peerMultihopTtl }),
      ...(settings.gracefulRestart && { gracefulRestart: settings.gracefulRestart }),
    },
    object: `external-peer/${peer.address}`,
    logFields: { source: peer.source, port: peer.port, localAddress: peer.localAddress, md5: peer.password !== undefined },
  }));
}
