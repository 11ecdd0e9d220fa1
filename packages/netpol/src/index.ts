export { PolicyCompiler, compileNetworkPolicies } from './compiler.js';
export type { CompileChanges, CompileInput, CompileStats, CompilerOptions } from './compiler.js';
export type { ObjectChanges } from './cluster-index.js';
// The backends read their kernels' counters in slices too.
export { runInSlices } from './steps.js';
export type { Steps } from './steps.js';
export { IP_FAMILIES } from './model.js';
export type {
  CompiledDirection,
  CompiledPolicy,
  CompiledRule,
  Direction,
  IpBlock,
  IpFamily,
  LocalPod,
  LocalPodDirection,
  NamedPortMatch,
  PerFamily,
  PodProblem,
  PolicyModel,
  PolicyProblem,
  PolicyTarget,
  PortRange,
  ProblemSeverity,
  Protocol,
  RulePeers,
} from './model.js';
export { policyProblemReports } from './problem-reports.js';
export type { PolicyProblemReport } from './problem-reports.js';
export { evaluateFlow } from './evaluate.js';
export type { FlowVerdict } from './evaluate.js';
export { explainFlow, FlowInputError } from './explain.js';
export type { DefaultDenyState, DirectionExplanation, DirectionVerdict, ExplainOptions, Flow, FlowExplanation, RuleRef } from './explain.js';
export { cidrFamily, peersInFamily, renderedOnRead } from './family.js';
export type { FamilyPeers } from './family.js';
export { isPodActionable } from './pods.js';
export { compileLabelSelector } from './selector.js';
export { PolicyInputError } from './input-error.js';
export type { CompiledSelector } from './selector.js';
export type {
  ContainerLike,
  ContainerPortLike,
  IPBlockLike,
  LabelSelectorLike,
  LabelSelectorRequirementLike,
  Labels,
  NamespaceLike,
  NetworkPolicyEgressRuleLike,
  NetworkPolicyIngressRuleLike,
  NetworkPolicyLike,
  NetworkPolicyPeerLike,
  NetworkPolicyPortLike,
  NetworkPolicySpecLike,
  ObjectMetaLike,
  PodLike,
} from './types.js';
export {
  COMMON_CHAIN,
  DEFAULT_CHAIN,
  DESTINATION_SET_PREFIX,
  NETPOL_CONTROLLER,
  NFLOG_GROUP,
  NetpolSyncMetrics,
  POD_CHAIN_PREFIX,
  POLICY_CHAIN_PREFIX,
  PolicyRenders,
  SOURCE_SET_PREFIX,
  TAIL_CHAIN,
  TOP_CHAINS,
  createExplainService,
  netpolExplainServiceKey,
  DefaultDenyPodCidrs,
  PhaseHandOff,
  TwoPhaseApply,
  createNetpolController,
  defineNetpolPlugin,
  informerSources,
  netpolFamilies,
  netpolOptionFields,
  ownChainPattern,
  ownSetPattern,
  podChainName,
  podChainPlan,
  podInComments,
  policyChainName,
  reportPolicyProblems,
  reportRefusedPolicies,
  ruleSetKey,
  stableHash,
  DropLog,
  POLICY_DROP_REASON,
} from './runtime/index.js';
export type {
  DropLogDeps,
  DropLogLogger,
  DropLogOptions,
  DropRecord,
  ChainVerdictCounter,
  AppliedModel,
  ExplainAnswer,
  ExplainEndpoint,
  ExplainRequest,
  ExplainResult,
  NetpolExplainService,
  DataplaneSync,
  Hook,
  NetpolBackend,
  NetpolControllerDeps,
  NetpolControllerOptions,
  NetpolDataplane,
  NetpolObjectCounts,
  NetpolOptions,
  NetpolPluginOverrides,
  NetpolPolicyRender,
  NetpolSources,
  NodeApplied,
  NodeRenderInput,
  PodChainPlan,
  PoliciesApplied,
  PolicyFamilyObjects,
  ResolvedNetpolOptions,
  TwoPhaseKernel,
  WarningLogger,
} from './runtime/index.js';
