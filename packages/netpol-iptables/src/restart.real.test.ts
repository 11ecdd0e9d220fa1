import { runNetpolRestartSuite } from '@kube-router/netpol-testing';
import { iptablesBackend } from './testing/backend.js';

runNetpolRestartSuite(iptablesBackend);
