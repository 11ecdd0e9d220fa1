export { createNetpolNftablesPlugin, deleteNetpolTables, informerSources, netpolNftablesPlugin } from './plugin.js';
export type { NetpolNftablesPluginOverrides } from './plugin.js';
export { createNetpolNftablesController, NETPOL_CONTROLLER } from './controller.js';
export type { NetpolControllerDeps, NetpolSources } from './controller.js';
export { netpolNftablesOptions } from './options.js';
export type { NetpolNftablesOptions, ResolvedNetpolNftablesOptions } from './options.js';
export { KernelApplier } from './kernel.js';
export type { ApplyResult, DesiredState, KernelApplierOptions, KernelTimings } from './kernel.js';
export { renderPolicy } from './render-policy.js';
export type { PolicyFamilyRender, PolicyRender } from './render-policy.js';
export { renderNode } from './render-node.js';
export type { NodeRender, NodeRenderOptions } from './render-node.js';
export type { ChainRender, NftRuleText, SetKind, SetRender } from './objects.js';
export { ipBlockElements } from './interval.js';
export { removeIptablesLeftovers } from './iptables-leftovers.js';
export type { IptablesLeftoversOptions } from './iptables-leftovers.js';
export { NetpolNftablesMetrics } from './metrics.js';
export {
  ACCEPT_MARK,
  COMMON_CHAIN,
  DEFAULT_CHAIN,
  EGRESS_MAP,
  INGRESS_MAP,
  LOCAL_PODS_SET,
  NFLOG_GROUP,
  POLICY_MARK,
  TABLES,
  TAIL_CHAIN,
  TOP_CHAINS,
  podChainName,
  policyChainName,
  ruleSetKey,
  ruleSetName,
} from './names.js';
export type { RuleSetRole } from './names.js';
