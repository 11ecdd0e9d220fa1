import { runNetpolConformanceSuite } from '@kube-router/testkit/netpol-conformance';
import { startIptablesEnforcer } from './testing/enforcer.js';
import { missingForRealTests, testRunId } from './testing/world.js';

const missing = missingForRealTests();

runNetpolConformanceSuite({ name: 'iptables', startEnforcer: startIptablesEnforcer, runId: testRunId(), ...(missing ? { skip: missing } : {}) });
