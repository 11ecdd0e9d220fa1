import { runNetpolConformanceSuite } from '@kube-router/testkit/netpol-conformance';
import type { NetpolConformanceFeatures } from '@kube-router/testkit/netpol-conformance';
import type { NetpolTestBackend } from './backend.js';
import { startTestEnforcer } from './enforcer.js';
import { missingForRealTests, testRunId } from './world.js';

/**
 * The backend-neutral conformance suite (`@kube-router/testkit/netpol-conformance`) against the backend, with the
 * options that turn on `features`: kube-router's --netpol-default-deny (every default case still holds, and a pod
 * whose rules arrive late is rejected until they do) or isolateUnselectedPods.
 */
export function runNetpolBackendConformance(backend: NetpolTestBackend, features: NetpolConformanceFeatures = {}): void {
  const missing = missingForRealTests(backend);
  const mode = features.defaultDeny ? ' with --netpol-default-deny' : features.isolateUnselectedPods ? ' with isolateUnselectedPods' : '';
  runNetpolConformanceSuite({
    name: `${backend.name}${mode}`,
    startEnforcer: (env) => startTestEnforcer(backend, env, { options: { ...features } }),
    features,
    runId: testRunId(),
    ...(missing ? { skip: missing } : {}),
  });
}
