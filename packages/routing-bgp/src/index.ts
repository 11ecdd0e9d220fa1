export { DEFAULT_GOBGP_API_SOCKET, gobgpApiTarget, routingBgpOptions, routingBgpPlugin } from './plugin.js';
export type { RoutingBgpOptions } from './plugin.js';
export { ROUTING_BGP_CONTROLLER } from './controller.js';
export { DEFAULT_GOBGP_PROTO_DIR, GobgpApiError } from './gobgp-api.js';
export { NODE_ASN_ANNOTATION } from './nodes.js';
export { NODE_ADDRESSES_IPSET, POD_SUBNETS_IPSET } from './pod-egress.js';
