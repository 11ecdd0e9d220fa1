/** kube-router's names, kept so that an agent replacing kube-router adopts what is already on the node. */
export const DUMMY_INTERFACE = 'kube-dummy-if';
export const LOCAL_IPS_SET = 'kube-router-local-ips';
export const SERVICE_IPS_SET = 'kube-router-svip';
export const SERVICE_IP_PORTS_SET = 'kube-router-svip-prt';
/** Ours (kube-router has none): LoadBalancer IP,proto:port with loadBalancerSourceRanges, and the ranges each admits. */
export const LB_FIREWALL_SET = 'kube-router-lb-fw';
export const LB_SOURCE_RANGES_SET = 'kube-router-lb-src';
/** Ours: service address,proto:port with no usable endpoint (rejected), or none on this node under policy Local (dropped). */
export const NO_ENDPOINTS_SET = 'kube-router-svip-noep';
export const NO_LOCAL_ENDPOINTS_SET = 'kube-router-svip-noloc';
export const FIREWALL_CHAIN = 'KUBE-ROUTER-SERVICES';
/** Ours (kube-router writes these rules straight into POSTROUTING): the nat chain of IPVS masquerading. */
export const MASQUERADE_CHAIN = 'KUBE-ROUTER-SVC-MASQ';

// kube-router's Service annotations are read by both proxies: they live in @kube-router/kube.
export { SERVICE_ANNOTATIONS as ANNOTATIONS } from '@kube-router/kube';

/** ipset names carry the family for IPv6, as kube-router's getIPSetName does. */
export function familySetName(name: string, family: 'ipv4' | 'ipv6'): string {
  return family === 'ipv6' ? `inet6:${name}` : name;
}

/** The bridge kube-router's CNI configuration attaches pods to; their ports get hairpin_mode for hairpin Services. */
export const POD_BRIDGE = 'kube-bridge';
