export { createProxyNftablesPlugin, PROXY_NFTABLES_PLUGIN, proxyNftablesPlugin } from './plugin.js';
export type { ProxyNftablesPluginOverrides } from './plugin.js';
export { createProxyNftablesController, PROXY_CONTROLLER } from './controller.js';
export type { ProxyNftablesController, ProxyNftablesDeps, ProxyNftablesSyncReport, ProxySources } from './controller.js';
export { proxyNftablesOptions } from './options.js';
export type { ProxyNftablesOptions, ResolvedProxyNftablesOptions } from './options.js';
export { buildProxyModel } from './model.js';
export type { ModelInputs, ModelOptions, NftProtocol, ProxyModel, ServicePortPlan, ServiceProblem } from './model.js';
export { ANNOTATIONS, TABLES } from './names.js';
