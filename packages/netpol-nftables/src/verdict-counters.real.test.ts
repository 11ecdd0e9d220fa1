import { runNetpolVerdictCounterSuite } from '@kube-router/netpol-testing';
import { nftablesBackend } from './testing/backend.js';

runNetpolVerdictCounterSuite(nftablesBackend);
