export { createNetpolController } from './controller.js';
export type { NetpolControllerDeps, NetpolControllerOptions } from './controller.js';
export type {
  DataplaneSync,
  NetpolDataplane,
  NetpolPolicyRender,
  NodeApplied,
  NodeRenderInput,
  PolicyFamilyObjects,
} from './dataplane.js';
export type { NetpolObjectCounts } from './metrics.js';
export { defineNetpolPlugin } from './plugin.js';
export type { NetpolBackend, NetpolPluginOverrides } from './plugin.js';
export { PhaseHandOff, TwoPhaseApply } from './two-phase-apply.js';
export type { PoliciesApplied, TwoPhaseKernel } from './two-phase-apply.js';
export { podChainPlan, podInComments } from './pod-chain.js';
export type { PodChainPlan } from './pod-chain.js';
export { NetpolSyncMetrics } from './metrics.js';
export { DropLog, POLICY_DROP_REASON } from './drop-log.js';
export type { DropLogDeps, DropLogLogger, DropLogOptions, DropRecord } from './drop-log.js';
export { VerdictCounters } from './verdict-counters.js';
export type { ChainVerdictCounter, RejectReason, Verdict, VerdictCountersOptions } from './verdict-counters.js';
export { netpolFamilies, netpolOptionFields } from './options.js';
export type { NetpolOptions, ResolvedNetpolOptions } from './options.js';
export { informerSources } from './sources.js';
export type { NetpolSources, WarningLogger } from './sources.js';
export {
  NETPOL_CONTROLLER,
  PolicyRenders,
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
  TOP_CHAINS,
  ownChainPattern,
  ownSetPattern,
  podChainName,
  policyChainName,
  ruleSetKey,
  stableHash,
} from './names.js';
export type { Hook } from './names.js';
export { createExplainService, netpolExplainServiceKey } from './explain-service.js';
export type { AppliedModel, ExplainAnswer, ExplainEndpoint, ExplainRequest, ExplainResult, NetpolExplainService } from './explain-service.js';
