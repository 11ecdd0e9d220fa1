import { runNetpolContractSuite } from '@kube-router/netpol-testing';
import { nftablesBackend } from './testing/backend.js';

runNetpolContractSuite(nftablesBackend);
