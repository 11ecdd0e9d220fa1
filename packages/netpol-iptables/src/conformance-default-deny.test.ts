import { runNetpolConformanceSuite } from '@kube-router/testkit/netpol-conformance';
import { startTestEnforcer } from './testing/enforcer.js';
import { missingForRealTests, testRunId } from './testing/world.js';

const missing = missingForRealTests();

// kube-router's --netpol-default-deny: every case of the default suite still holds, and a pod whose rules arrive late
// is rejected until they do.
runNetpolConformanceSuite({
  name: 'iptables with --netpol-default-deny',
  startEnforcer: (env) => startTestEnforcer(env, { options: { defaultDeny: true } }),
  features: { defaultDeny: true },
  runId: testRunId(),
  ...(missing ? { skip: missing } : {}),
});
