import { runNetpolBackendConformance } from '@kube-router/netpol-testing';
import { nftablesBackend } from './testing/backend.js';

runNetpolBackendConformance(nftablesBackend, { isolateUnselectedPods: true });
