export { DEFAULT_GOBGP_API_SOCKET, gobgpApiTarget, routingBgpOptions, routingBgpPlugin } from './plugin.js';
export type { RoutingBgpOptions } from './plugin.js';
export { ROUTING_BGP_CONTROLLER } from './controller.js';
export { DEFAULT_GOBGP_PROTO_DIR, GobgpApiError } from './gobgp-api.js';
export { clusterAsnProblem, NODE_ASN_ANNOTATION } from './nodes.js';
export {
  EXPORT_POLICY,
  IMPORT_POLICY,
  NODE_COMMUNITIES_ANNOTATION,
  NODE_CUSTOM_IMPORT_REJECT_ANNOTATION,
  PATH_PREPEND_AS_ANNOTATION,
  PATH_PREPEND_REPEAT_ANNOTATION,
} from './policies.js';
export {
  ADVERTISE_CLUSTER_IP_ANNOTATION,
  ADVERTISE_EXTERNAL_IP_ANNOTATION,
  ADVERTISE_LOADBALANCER_IP_ANNOTATION,
  SERVICE_LOCAL_ANNOTATION,
  SKIP_LOADBALANCER_IPS_ANNOTATION,
} from './vips.js';
export {
  BGP_LOCAL_ADDRESSES_ANNOTATION,
  PEERS_ANNOTATION,
  PEER_ASNS_ANNOTATION,
  PEER_IPS_ANNOTATION,
  PEER_LOCAL_IPS_ANNOTATION,
  PEER_PASSWORDS_ANNOTATION,
  PEER_PORTS_ANNOTATION,
  peersFromLists,
} from './external-peers.js';
export type { ExternalPeerSpec, PeerListName, PeerListProblem, PeerLists } from './external-peers.js';
export { RR_CLIENT_ANNOTATION, RR_SERVER_ANNOTATION } from './route-reflector.js';
export { NODE_ADDRESSES_IPSET, POD_SUBNETS_IPSET } from './pod-egress.js';
