import { runNetpolConformanceSuite } from '@kube-router/testkit/netpol-conformance';
import { startNftablesEnforcer } from './testing/enforcer.js';
import { missingForRealTests, testRunId } from './testing/world.js';

const missing = missingForRealTests();

runNetpolConformanceSuite({
  name: 'nftables',
  startEnforcer: startNftablesEnforcer,
  runId: testRunId(),
  ...(missing ? { skip: missing } : {}),
});
