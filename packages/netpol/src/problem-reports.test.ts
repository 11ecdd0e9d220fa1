import { describe, expect, it } from 'vitest';
import { PolicyCompiler } from './compiler.js';
import { policyProblemReports } from './problem-reports.js';

const pod = (name: string, labels: Record<string, string>) => ({
  metadata: { namespace: 'x', name, uid: name, labels },
  spec: { nodeName: 'node-a', containers: [] },
  status: { phase: 'Running', podIP: '10.244.0.5', podIPs: [{ ip: '10.244.0.5' }] },
});
const policy = (name: string, app: string, spec: Record<string, unknown>) => ({
  metadata: { namespace: 'x', name },
  spec: { podSelector: { matchLabels: { app } }, ...spec },
});

describe('policyProblemReports', () => {
  it('fails closed a local invalid policy, and leaves a remote one to its own node', () => {
    const model = new PolicyCompiler({ nodeName: 'node-a' }).compile({
      namespaces: [{ metadata: { name: 'x', labels: {} } }],
      pods: [pod('a', { app: 'a' })],
      policies: [
        policy('local-bad', 'a', { ingress: [{ from: [{ ipBlock: { cidr: 'not-a-cidr' } }] }] }),
        policy('remote-bad', 'nobody-here', { ingress: [{ from: [{ ipBlock: { cidr: 'not-a-cidr' } }] }] }),
      ],
    });
    const reports = policyProblemReports(model);
    expect(reports.map((r) => [r.policy, r.failsClosed, r.reason])).toEqual([['x/local-bad', true, 'InvalidNetworkPolicy']]);
    expect(reports[0]!.message).toMatch(/^invalid network policy, its pods fail closed \(ingress\): spec\.ingress\[0\]/);
  });
});
