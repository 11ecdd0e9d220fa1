import { backendTestRunId, missingForBackendTests, startBackendWorld } from '@kube-router/testkit/netpol-conformance';
import type { BackendWorld } from '@kube-router/testkit/netpol-conformance';
import { startTestEnforcer } from './enforcer.js';
import type { TestEnforcer, TestEnforcerOptions } from './enforcer.js';

/** Why the real tests cannot run here, or undefined. */
export function missingForRealTests(): string | undefined {
  return missingForBackendTests(['iptables', 'ip6tables', 'ipset', 'iptables-restore', 'iptables-save']);
}

/** `tnf` and three random characters: the lab's run id, so that every name these tests create starts with krt-tnf. */
export function testRunId(): string {
  return backendTestRunId('tnf');
}

export type World = BackendWorld<TestEnforcerOptions, TestEnforcer>;

/** The embedded API server and a lab node (names `krt-tnf...`); enforcers started through it stop with it. */
export function startWorld(): Promise<World> {
  return startBackendWorld({ startEnforcer: startTestEnforcer, runId: testRunId() });
}
