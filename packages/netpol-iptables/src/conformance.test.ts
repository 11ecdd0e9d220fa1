import { runNetpolBackendConformance } from '@kube-router/netpol-testing';
import { iptablesBackend } from './testing/backend.js';

runNetpolBackendConformance(iptablesBackend);
