import { runNetpolRestartSuite } from '@kube-router/netpol-testing';
import { nftablesBackend } from './testing/backend.js';

runNetpolRestartSuite(nftablesBackend);
