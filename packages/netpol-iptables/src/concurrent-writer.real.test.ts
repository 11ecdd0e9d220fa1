import { ipsetAndIptablesWriter, runNetpolConcurrentWriterSuite } from '@kube-router/netpol-testing';
import { iptablesBackend } from './testing/backend.js';

runNetpolConcurrentWriterSuite(iptablesBackend, ipsetAndIptablesWriter);
