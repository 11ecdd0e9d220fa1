export { createAgent } from './agent.js';
export { AssemblyError } from './assembly.js';
export { defaultCatalog, FEATURE_FLAGS, firewallOptions, MissingFeatureError, pluginsForConfig } from './catalog.js';
export { environmentFor, kubeEnvironment } from './kube-environment.js';
export { FEATURES, helpText, parseFlags } from './flags.js';
export { EXIT, runCli } from './run-cli.js';
export { formatGoDuration, parseGoDuration } from './duration.js';

export type { Agent, CreateAgentInput, ServiceEntry, StopReport } from './agent.js';
export type { PluginEntry } from './assembly.js';
export type { PluginCatalog, PluginFactory } from './catalog.js';
export type { AgentConfig, Feature, FlagsResult } from './flags.js';
export type { AgentOptions, ListenAddress, MetricsListenAddress, ResolvedAgentOptions } from './options.js';
export type { AgentEnvironment, CliDependencies } from './run-cli.js';
