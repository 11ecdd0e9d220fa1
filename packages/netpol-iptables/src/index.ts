export { createNetpolIptablesPlugin, netpolIptablesPlugin } from './plugin.js';
export type { NetpolIptablesPluginOverrides } from './plugin.js';
export { createIptablesDataplane } from './dataplane.js';
export { netpolIptablesOptions } from './options.js';
export type { NetpolIptablesOptions, ResolvedNetpolIptablesOptions } from './options.js';
export { KernelApplier } from './kernel.js';
export type { ApplyResult, KernelApplierOptions, KernelTimings, NodeFamilyRender, NodeRender } from './kernel.js';
export { renderPolicy, portMatch } from './render-policy.js';
export type { PolicyFamilyRender, PolicyRender } from './render-policy.js';
export { renderLocalPodsSet, renderNode } from './render-node.js';
export type { NodeRenderOptions } from './render-node.js';
export type { ChainRender, SetRender } from './rules.js';
export { NetpolMetrics } from './metrics.js';
export { ACCEPT_MARK, POLICY_MARK, TOP_CHAINS, ipBlockSetName, namedPortSetName, peerPodSetName, targetSetName } from './names.js';
// Backend-neutral, from @kube-router/netpol: re-exported so that either plugin's users find them where they were.
export { COMMON_CHAIN, DEFAULT_CHAIN, NETPOL_CONTROLLER, NFLOG_GROUP, informerSources, podChainName, policyChainName, ruleSetKey } from '@kube-router/netpol';
export type { NetpolSources } from '@kube-router/netpol';
