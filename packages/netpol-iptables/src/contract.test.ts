import { runNetpolContractSuite } from '@kube-router/netpol-testing';
import { iptablesBackend } from './testing/backend.js';

runNetpolContractSuite(iptablesBackend);
