export { createNetpolIptablesPlugin, informerSources, netpolIptablesPlugin } from './plugin.js';
export type { NetpolIptablesPluginOverrides } from './plugin.js';
export { createNetpolController, NETPOL_CONTROLLER } from './controller.js';
export type { NetpolControllerDeps, NetpolSources } from './controller.js';
export { netpolIptablesOptions } from './options.js';
export type { NetpolIptablesOptions, ResolvedNetpolIptablesOptions } from './options.js';
export { KernelApplier } from './kernel.js';
export type { ApplyResult, DesiredState, KernelApplierOptions, KernelTimings } from './kernel.js';
export { renderPolicy, portMatch } from './render-policy.js';
export type { PolicyFamilyRender, PolicyRender } from './render-policy.js';
export { renderNode } from './render-node.js';
export type { NodeRenderOptions } from './render-node.js';
export type { ChainRender, SetRender } from './rules.js';
export { NetpolMetrics } from './metrics.js';
export {
  ACCEPT_MARK,
  COMMON_CHAIN,
  DEFAULT_CHAIN,
  NFLOG_GROUP,
  POLICY_MARK,
  TOP_CHAINS,
  ipBlockSetName,
  namedPortSetName,
  peerPodSetName,
  ruleSetKey,
  podChainName,
  policyChainName,
  targetSetName,
} from './names.js';
