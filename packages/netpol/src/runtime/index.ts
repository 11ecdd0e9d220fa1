export { NetpolSyncMetrics } from './metrics.js';
export { netpolFamilies, netpolOptionFields } from './options.js';
export { informerSources } from './sources.js';
export type { NetpolSources, WarningLogger } from './sources.js';
export {
  NETPOL_CONTROLLER,
  PolicyRenders,
  PolicyWarnings,
  DefaultDenyPodCidrs,
  reportPolicyProblems,
  reportRefusedPolicies,
} from './sync.js';
export {
  COMMON_CHAIN,
  DEFAULT_CHAIN,
  DESTINATION_SET_PREFIX,
  NFLOG_GROUP,
  POD_CHAIN_PREFIX,
  POLICY_CHAIN_PREFIX,
  SOURCE_SET_PREFIX,
  TAIL_CHAIN,
  podChainName,
  policyChainName,
  ruleSetKey,
  stableHash,
} from './names.js';
