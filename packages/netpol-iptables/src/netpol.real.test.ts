import { runNetpolEnforcementSuite } from '@kube-router/netpol-testing';
import { iptablesBackend } from './testing/backend.js';

runNetpolEnforcementSuite(iptablesBackend);
