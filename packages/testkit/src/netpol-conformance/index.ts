export { runNetpolConformanceSuite } from './suite.js';
export { CONFORMANCE_CASES, DEFAULT_CASE_MODES } from './cases.js';
export { CaseContext } from './case-context.js';
export { Reachability, describeConnection } from './reachability.js';
export { observeReachability, mismatchesOf } from './matrix.js';
export { renderReachabilityReport, renderTable } from './report.js';
export { ConformanceWorld } from './world.js';
export { NAMESPACES, POD_NAMES, POD_KEYS, PORTS, PROTOCOLS, portName } from './model.js';

export type { NetpolConformanceOptions, NetpolConformanceFeatures } from './suite.js';
export type { ConformanceCase, CaseMode } from './cases.js';
export type { CaseContextOptions, CaseEnforcerControl, LatePodProbe } from './case-context.js';
export type { EnforcerEnv, NetpolEnforcer, StartEnforcer, SyncOutcome } from './enforcer.js';
export type { Connection, PodSet, PortFilter } from './reachability.js';
export type { MatrixScope, Observation, Prober } from './matrix.js';
export type { WorldOptions } from './world.js';
export type { IpFamily, PodKey, ProbeProtocol } from './model.js';
export type { NetworkPolicySpec, LabelSelectorSpec, PolicyPeerSpec, PolicyPortSpec } from './policy-spec.js';
