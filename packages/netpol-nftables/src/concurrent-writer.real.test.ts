import { nftWriter, runNetpolConcurrentWriterSuite } from '@kube-router/netpol-testing';
import { nftablesBackend } from './testing/backend.js';

runNetpolConcurrentWriterSuite(nftablesBackend, nftWriter);
