export { runNetpolConformanceSuite } from './suite.js';
export { CONFORMANCE_CASES } from './cases.js';
export { DEFAULT_CASE_MODES } from './case-mode.js';
export { CaseContext } from './case-context.js';
export { Reachability, describeConnection } from './reachability.js';
export { observeReachability, mismatchesOf } from './matrix.js';
export { renderReachabilityReport, renderTable } from './report.js';
export { ConformanceWorld } from './world.js';
export { NAMESPACES, POD_NAMES, POD_KEYS, PORTS, PROTOCOLS, portName } from './model.js';
export { backendTestRunId, mismatches, missingForBackendTests, periodicSyncMismatches, probeThroughout, startBackendWorld } from './backend-world.js';
export { FIXTURE_NODE, fixtureNamespace, fixturePod, fixturePolicy, smallClusterInput } from './fixtures.js';
export {
  BENCH_PROBE_LABEL,
  NETPOL_BENCH_CLUSTER,
  benchFirstRule,
  benchLabelChange,
  benchPodIndex,
  benchPodIp,
  benchPolicy,
  benchProbeAnchor,
  benchProbeChange,
  benchProbePolicy,
  median,
  percentile,
  seedNetpolBenchCluster,
} from './bench-cluster.js';

export type { NetpolConformanceOptions, NetpolConformanceFeatures } from './suite.js';
export type { ConformanceCase } from './cases.js';
export type { CaseMode } from './case-mode.js';
export type { CaseContextOptions, CaseEnforcerControl, LatePodProbe } from './case-context.js';
export type { EnforcerEnv, EnforcerFlow, EnforcerVerdict, NetpolEnforcer, StartEnforcer, SyncOutcome } from './enforcer.js';
export type { Connection, PodSet, PortFilter } from './reachability.js';
export type { MatrixScope, Observation, Prober } from './matrix.js';
export type { WorldOptions } from './world.js';
export type { BackendWorld, BackendWorldOptions, Expectation, ProbedThroughout } from './backend-world.js';
export type { FixtureNamespace, FixturePod, FixturePolicy } from './fixtures.js';
export type { IpFamily, PodKey, ProbeProtocol } from './model.js';
export type { NetworkPolicySpec, LabelSelectorSpec, PolicyPeerSpec, PolicyPortSpec } from './policy-spec.js';
