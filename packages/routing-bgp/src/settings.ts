import type { V1Node, V1Service } from '@kubernetes/client-node';
import type { RouteSyncService } from '@kube-router/controller';
import type { ClusterLister, EndpointSliceLister, Lister } from '@kube-router/kube';
import type { CommandRunner } from '@kube-router/netfilter';
import type { ExternalPeerSpec } from './external-peers.js';
import type { GobgpClient, GracefulRestartConfig } from './gobgp-api.js';
import type { VipAddressValidation, VipFlags } from './vips.js';

export interface RoutingSettings {
  /** --routes-sync-period. */
  syncPeriodMs: number;
  minSyncIntervalMs?: number;
  syncTimeoutMs?: number;
  /** --bgp-port: where gobgpd listens and where it dials its peers. */
  bgpPort: number;
  /** --bgp-holdtime, seconds. */
  holdTimeSeconds: number;
  /** --router-id: an IPv4 address, `generate`, or undefined for this node's IPv4 address. */
  routerId?: string;
  /** --enable-ipv4 / --enable-ipv6: the node must have an address of each enabled family; IPv6 is switched on. */
  enabledFamilies?: Readonly<Record<'ipv4' | 'ipv6', boolean>>;
  /** --cluster-asn: every node's ASN in a full mesh (without one, each node's kube-router.io/node.asn). */
  clusterAsn: number;
  /** --nodes-full-mesh. */
  nodesFullMesh: boolean;
  /** --enable-ibgp. */
  enableIbgp: boolean;
  /** --advertise-pod-cidr: this node's pod CIDRs go to external peers too (the mesh always gets them). */
  advertisePodCidr: boolean;
  /** --advertise-cluster-ip, --advertise-external-ip, --advertise-loadbalancer-ip. */
  vipFlags: VipFlags;
  /** --strict-external-ip-validation with its ranges; undefined announces every externalIP and LoadBalancer IP. */
  vipValidation?: VipAddressValidation;
  /** --override-nexthop: paths sent to external peers carry this node's session address as next hop. */
  overrideNextHop: boolean;
  /** --enable-pod-egress. */
  enablePodEgress: boolean;
  /**
   * The node side of pod networking: kube-bridge, the CNI file (--enable-cni gives the file, --auto-mtu the MTU) and
   * the forwarding rules. Left out only where a stand-in for the kernel has none of it.
   */
  podNetwork?: { cniConfFile?: string; autoMtu: boolean };
  /** gobgpd's API: `host:port` (--gobgp-admin-address, --gobgp-admin-port) or `unix:///path`. */
  apiTarget: string;
  /** Runs and supervises gobgpd; false drives a gobgpd someone else runs at apiTarget. */
  manageGobgpd: boolean;
  gobgpdBinary: string;
  protoDir?: string;
  /** The network namespace gobgpd, `ip` and iptables run in; the agent itself stays where it is. */
  netns?: string;
  /** Deadline of each gobgp API call. */
  apiTimeoutMs: number;
  /** How long learned routes outlive a gobgpd restart before an empty RIB may withdraw them. */
  restartGraceMs: number;
  /** --peer-router-ips and friends: when any, the Node's peer annotations are not read (kube-router). */
  peerRouters: readonly ExternalPeerSpec[];
  /** --peer-router-multihop-ttl (external peers, above 1 only). */
  peerMultihopTtl: number;
  /** --bgp-graceful-restart with its times; undefined when off. */
  gracefulRestart?: GracefulRestartConfig;
}

export interface RoutingCluster {
  nodes: ClusterLister<V1Node>;
  onNodesChanged(handler: () => void): () => void;
  /** Records a Warning event on a Node; never throws. */
  warn(node: V1Node, reason: string, message: string): void;
  /** Services and their EndpointSlices: the VIPs this node announces. */
  services: Lister<V1Service>;
  endpointSlices: Pick<EndpointSliceLister, 'listForService' | 'hasSynced'>;
  onServicesChanged(handler: () => void): () => void;
  /** Records a Warning event on a Service; never throws. */
  warnService(service: V1Service, reason: string, message: string): void;
}

export interface RoutingDeps {
  routes: RouteSyncService;
  runner: CommandRunner;
  /** gobgpd's API client; by default one for settings.apiTarget (a unit test gives a stand-in). */
  gobgp?: GobgpClient;
}
