import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileNetworkPolicies } from './compiler.js';
import { evaluateFlow } from './evaluate.js';
import { explainFlow, FlowInputError } from './explain.js';
import type { ExplainOptions, Flow } from './explain.js';
import { clusterArb, IPS } from './testing/arbitraries.js';
import { NODE, namespace, pod, policy } from './testing/fixtures.js';
import { oracleFlow } from './testing/oracle.js';

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

  it('with default deny, rejects an address of the pod CIDRs that is no pod of the model, except the node\'s own', () => {
    const defaultDeny = { podCidrs: ['10.0.0.0/24'], isNodeAddress: (ip: string) => ip === '10.0.0.254' };
    // 10.0.0.50 started after the sync: not in the model, not in the kernel's local pods set.
    expect(explainFlow(model, flow('10.0.0.50', '10.0.0.9'), new Set(), { defaultDeny })).toEqual({
      allowed: false,
      egress: { verdict: 'default-deny', policies: [], failedPolicies: [] },
      ingress: { verdict: 'not-isolated', pod: 'dev/free', policies: [], failedPolicies: [] },
    });
    expect(explainFlow(model, flow('10.0.0.9', '10.0.0.50'), new Set(), { defaultDeny })).toMatchObject({ allowed: false, ingress: { verdict: 'default-deny' } });
    expect(explainFlow(model, flow('10.0.0.254', '10.0.0.9'), new Set(), { defaultDeny })).toMatchObject({ allowed: true, egress: { verdict: 'not-local' } });
    expect(explainFlow(model, flow('10.0.1.5', '10.0.0.9'), new Set(), { defaultDeny })).toMatchObject({ allowed: true, egress: { verdict: 'not-local' } });
    expect(explainFlow(model, flow('10.0.0.50', '10.0.0.9'))).toMatchObject({ allowed: true, egress: { verdict: 'not-local' } });
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

  const optionsArb = fc.record({
    refused: fc.boolean(),
    isolateUnselectedPods: fc.boolean(),
    defaultDeny: fc.option(fc.subarray(['10.0.0.0/24', 'fd00::/64']), { nil: undefined }),
  });

  it('agrees with the oracle (NetworkPolicy restated from the policies\' side) on every flow and option', () => {
    fc.assert(
      fc.property(clusterArb, optionsArb, fc.array(flowArb, { minLength: 1, maxLength: 10 }), (cluster, settings, flows) => {
        const compiled = compileNetworkPolicies({ nodeName: NODE, ...cluster });
        const refused = new Set(settings.refused && compiled.policies[0] ? [compiled.policies[0].id] : []);
        const options: ExplainOptions = {
          isolateUnselectedPods: settings.isolateUnselectedPods,
          // 10.0.0.1 plays the node's bridge gateway, inside the pod CIDR.
          ...(settings.defaultDeny ? { defaultDeny: { podCidrs: settings.defaultDeny, isNodeAddress: (ip: string) => ip === '10.0.0.1' } } : {}),
        };
        for (const candidate of flows) {
          const explained = explainFlow(compiled, candidate, refused, options);
          const expected = oracleFlow(compiled, candidate, refused, options);
          expect(explained.allowed).toBe(expected.allowed);
          for (const direction of ['egress', 'ingress'] as const) {
            const side = explained[direction];
            expect(side.verdict).toBe(expected[direction].verdict);
            expect(side.policies).toEqual(expected[direction].policies);
            // The rule named is the first that allows it, in policy id then spec order; none when not allowed.
            expect(side.rule).toEqual(expected[direction].allowingRules[0]);
          }
          // evaluateFlow, the renderers' reference, against the oracle with the default options.
          const plain = oracleFlow(compiled, candidate);
          expect(evaluateFlow(compiled, candidate)).toEqual({ allowed: plain.allowed, egress: plain.egress.verdict, ingress: plain.ingress.verdict });
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
