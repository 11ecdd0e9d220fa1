import { runNetpolDropLogSuite } from '@kube-router/netpol-testing';
import { nftablesBackend } from './testing/backend.js';

runNetpolDropLogSuite(nftablesBackend);
