/**
 * Which behaviour of the enforcer a case assumes. `default-allow`: Kubernetes' (pods that no policy selects are open).
 * `default-deny`: kube-router's --netpol-default-deny, which only closes the start-up race (an address of the node's
 * pod CIDRs whose pod's rules are not programmed yet is rejected); pods no policy selects stay open, so every
 * default-allow case holds too. `isolate-unselected`: a stronger mode some backends offer, where pods that no policy
 * selects are isolated both ways.
 */
export type CaseMode = 'default-allow' | 'default-deny' | 'isolate-unselected';

/** The modes a case holds in when it names none. */
export const DEFAULT_CASE_MODES: readonly CaseMode[] = ['default-allow', 'default-deny'];
