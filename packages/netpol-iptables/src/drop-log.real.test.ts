import { runNetpolDropLogSuite } from '@kube-router/netpol-testing';
import { iptablesBackend } from './testing/backend.js';

runNetpolDropLogSuite(iptablesBackend);
