import { runNetpolVerdictCounterSuite } from '@kube-router/netpol-testing';
import { iptablesBackend } from './testing/backend.js';

runNetpolVerdictCounterSuite(iptablesBackend);
