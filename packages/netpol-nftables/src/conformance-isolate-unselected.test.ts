import { runNetpolConformanceSuite } from '@kube-router/testkit/netpol-conformance';
import { startTestEnforcer } from './testing/enforcer.js';
import { missingForRealTests, testRunId } from './testing/world.js';

const missing = missingForRealTests();

runNetpolConformanceSuite({
  name: 'nftables with isolateUnselectedPods',
  startEnforcer: (env) => startTestEnforcer(env, { options: { isolateUnselectedPods: true } }),
  features: { isolateUnselectedPods: true },
  runId: testRunId(),
  ...(missing ? { skip: missing } : {}),
});
