import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileNetworkPolicies } from './compiler.js';
import { evaluateFlow } from './evaluate.js';
import { explainFlow, FlowInputError } from './explain.js';
import type { Flow } from './explain.js';
import { clusterArb, IPS } from './testing/arbitraries.js';
import { NODE, namespace, pod, policy } from './testing/fixtures.js';

const pods = [
  pod('prod/web', { ips: ['10.0.0.1', 'fd00::1'], labels: { app: 'web' }, ports: [{ name: 'http', port: 8080 }] }),
  pod('prod/client', { ips: ['10.0.0.2'], labels: { app: 'client' } }),
  pod('prod/remote', { ips: ['10.0.1.5'], labels: { app: 'client' }, node: 'node-b' }),
  pod('dev/free', { ips: ['10.0.0.9'] }),
];
const namespaces = [namespace('prod'), namespace('dev')];
const policies = [
  policy('prod/web-ingress', {
    podSelector: { matchLabels: { app: 'web' } },
    ingress: [{ from: [{ ipBlock: { cidr: '192.168.0.0/16' } }] }, { from: [{ podSelector: { matchLabels: { app: 'client' } } }], ports: [{ port: 'http' }] }],
  }),
  policy('prod/client-egress', { podSelector: { matchLabels: { app: 'client' } }, policyTypes: ['Egress'], egress: [{ ports: [{ port: 53, protocol: 'UDP' }] }] }),
];
const model = compileNetworkPolicies({ nodeName: NODE, pods, namespaces, policies });
const flow = (source: string, destination: string, port = 8080, protocol: Flow['protocol'] = 'TCP'): Flow => ({ source, destination, port, protocol });

describe('explainFlow', () => {
  it('names the rule that allows each isolated side, by policy, direction and spec index', () => {
    const answer = explainFlow(model, flow('10.0.1.5', '10.0.0.1'));
    expect(answer).toEqual({
      allowed: true,
      egress: { verdict: 'not-local', policies: [], failedPolicies: [] },
      ingress: {
        verdict: 'allowed',
        pod: 'prod/web',
        policies: ['prod/web-ingress'],
        rule: { policy: 'prod/web-ingress', direction: 'ingress', index: 1 },
        failedPolicies: [],
      },
    });
  });

  it('says no rule allows a flow, with the policies that isolate the side that drops it', () => {
    const answer = explainFlow(model, flow('10.0.0.2', '10.0.0.1'));
    expect(answer.allowed).toBe(false);
    expect(answer.egress).toEqual({ verdict: 'denied', pod: 'prod/client', policies: ['prod/client-egress'], failedPolicies: [] });
    // The destination would let it in: its own rule is named although the source's egress drops the flow.
    expect(answer.ingress.rule).toEqual({ policy: 'prod/web-ingress', direction: 'ingress', index: 1 });
    expect(explainFlow(model, flow('10.0.1.5', '10.0.0.1', 80)).ingress).toMatchObject({ verdict: 'denied', policies: ['prod/web-ingress'] });
    expect(explainFlow(model, flow('10.0.0.2', '10.0.1.5', 53, 'UDP')).egress.rule).toEqual({ policy: 'prod/client-egress', direction: 'egress', index: 0 });
  });

  it('leaves a side that no policy isolates open, unless isolateUnselectedPods closes it as its chain does', () => {
    expect(explainFlow(model, flow('10.0.0.9', '10.0.0.2', 1))).toMatchObject({
      allowed: true,
      egress: { verdict: 'not-isolated', pod: 'dev/free', policies: [] },
      ingress: { verdict: 'not-isolated', pod: 'prod/client', policies: [] },
    });
    const closed = explainFlow(model, flow('10.0.0.9', '10.0.0.2', 1), new Set(), { isolateUnselectedPods: true });
    expect(closed).toMatchObject({ allowed: false, egress: { verdict: 'denied' }, ingress: { verdict: 'denied' } });
  });

  it('fails closed the pods of a policy the kernel refused, naming it', () => {
    const answer = explainFlow(model, flow('10.0.1.5', '10.0.0.1'), new Set(['prod/web-ingress']));
    expect(answer.allowed).toBe(false);
    expect(answer.ingress).toEqual({ verdict: 'fail-closed', pod: 'prod/web', policies: ['prod/web-ingress'], failedPolicies: ['prod/web-ingress'] });
  });

  it('fails closed the direction whose policy did not compile, naming it', () => {
    const broken = compileNetworkPolicies({
      nodeName: NODE,
      pods,
      namespaces,
      policies: [...policies, policy('prod/bad', { podSelector: { matchLabels: { app: 'web' } }, ingress: [{ from: [{ ipBlock: { cidr: 'nope' } }] }] })],
    });
    expect(explainFlow(broken, flow('10.0.1.5', '10.0.0.1')).ingress).toMatchObject({ verdict: 'fail-closed', failedPolicies: ['prod/bad'] });
  });

  it.each([
    [flow('10.0.0', '10.0.0.1'), /source "10.0.0" is not an IP address/],
    [flow('10.0.0.1', 'web'), /destination "web" is not an IP address/],
    [flow('10.0.0.1', 'fd00::1'), /different address families/],
    [flow('10.0.0.1', '10.0.0.2', 0), /port 0 is not an integer in 1-65535/],
    [flow('10.0.0.1', '10.0.0.2', 65536), /port 65536/],
    [flow('10.0.0.1', '10.0.0.2', 80, 'ICMP' as Flow['protocol']), /protocol "ICMP" is not one of TCP, UDP, SCTP/],
  ])('refuses a malformed flow %j with a FlowInputError', (bad, message) => {
    expect(() => explainFlow(model, bad)).toThrow(FlowInputError);
    expect(() => explainFlow(model, bad)).toThrow(message);
  });
});

describe('explainFlow properties', () => {
  const flowArb = fc
    .record({
      source: fc.constantFrom(...IPS),
      destination: fc.constantFrom(...IPS),
      protocol: fc.constantFrom('TCP' as const, 'UDP' as const),
      port: fc.constantFrom(53, 80, 443, 8080),
    })
    .filter(({ source, destination }) => source.includes(':') === destination.includes(':'));

  it('evaluateFlow is its view: the same verdicts, and the explanation is consistent with them', () => {
    fc.assert(
      fc.property(clusterArb, fc.array(flowArb, { minLength: 1, maxLength: 10 }), (cluster, flows) => {
        const compiled = compileNetworkPolicies({ nodeName: NODE, ...cluster });
        for (const candidate of flows) {
          const verdict = evaluateFlow(compiled, candidate);
          const explained = explainFlow(compiled, candidate);
          expect(verdict.allowed).toBe(explained.allowed);
          expect([verdict.egress, verdict.ingress]).toEqual([explained.egress.verdict, explained.ingress.verdict]);
          for (const side of [explained.egress, explained.ingress]) {
            // A rule exactly when allowed, and it belongs to a policy that isolates the pod.
            expect(side.rule !== undefined).toBe(side.verdict === 'allowed');
            if (side.rule) expect(side.policies).toContain(side.rule.policy);
            expect(side.policies.length > 0).toBe(side.verdict === 'allowed' || side.verdict === 'denied' || side.verdict === 'fail-closed');
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('a refused policy only ever turns verdicts of its own pods into fail-closed', () => {
    fc.assert(
      fc.property(clusterArb, flowArb, (cluster, candidate) => {
        const compiled = compileNetworkPolicies({ nodeName: NODE, ...cluster });
        const refused = compiled.policies[0]?.id;
        if (refused === undefined) return;
        const before = explainFlow(compiled, candidate);
        const after = explainFlow(compiled, candidate, new Set([refused]));
        for (const direction of ['egress', 'ingress'] as const) {
          if (before[direction].policies.includes(refused)) expect(after[direction].verdict).toBe('fail-closed');
          else expect(after[direction]).toEqual(before[direction]);
        }
      }),
      { numRuns: 300 },
    );
  });
});
