export { createAgent } from './agent.js';
export { AssemblyError } from './assembly.js';
export {
  defaultCatalog,
  FEATURE_FLAGS,
  firewallOptions,
  firewallPlugins,
  flagOptions,
  MissingFeatureError,
  nftablesFirewallOptions,
  nftablesProxyOptions,
  pluginsForConfig,
  proxyPlugins,
} from './catalog.js';
export { environmentFor, kubeEnvironment } from './kube-environment.js';
export { connectToCluster } from './cluster.js';
export { FEATURES, FLAGS } from './flags.js';
export { helpText, parseFlags } from './parse-flags.js';
export { unsupportedSettings } from './feature-support.js';
export { cleanupAll } from './cleanup.js';
export { EXIT, runCli } from './run-cli.js';
export { formatGoDuration, parseGoDuration } from './duration.js';

export type { Agent, CreateAgentInput, ServiceEntry, StopReport } from './agent.js';
export type { PluginEntry } from './assembly.js';
export type { ClusterConnection, ClusterConnectionOptions } from './cluster.js';
export type { PluginCatalog, PluginFactory } from './catalog.js';
export type { AgentConfig } from './config.js';
export type {
  Feature,
  FlagDefinition,
  FlagName,
  FlagOptionTargets,
  FlagValues,
  LogFormat,
  OptionTarget,
} from './flags.js';
export type { FlagsResult } from './parse-flags.js';
export type { Unsupported } from './feature-support.js';
export type { CleanupReport } from './cleanup.js';
export type { AgentOptions, ListenAddress, MetricsListenAddress, ResolvedAgentOptions } from './options.js';
export type { AgentEnvironment, CliDependencies } from './run-cli.js';
