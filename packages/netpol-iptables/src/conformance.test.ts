import { runNetpolConformanceSuite } from '@kube-router/testkit/netpol-conformance';
import { startIptablesEnforcer } from './testing/enforcer.js';
import { missingForRealTests } from './testing/world.js';

const missing = missingForRealTests();

runNetpolConformanceSuite({ name: 'iptables', startEnforcer: startIptablesEnforcer, ...(missing ? { skip: missing } : {}) });
