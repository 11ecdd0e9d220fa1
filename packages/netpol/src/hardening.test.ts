/*
 * Input a careless or hostile user can put in the cluster, found by fuzzing the agent: each case used to break the
 * compiler's contract (rules iptables-restore refuses, a policy replaced by another, a throw, or an incremental
 * compile that disagrees with a fresh one).
 */
import { describe, expect, it } from 'vitest';
import { PolicyCompiler, compileNetworkPolicies } from './compiler.js';
import type { CompileInput } from './compiler.js';
import { NODE, namespace, pod, policy } from './testing/fixtures.js';
import type { NetworkPolicyLike, PodLike } from './types.js';

const namespaces = [namespace('prod')];

describe('a named container port outside 1..65535', () => {
  const pods = [
    pod('prod/web', { labels: { app: 'web' }, ips: ['10.0.0.1'], ports: [{ name: 'http', port: 70_000 }] }),
    pod('prod/api', { labels: { app: 'api' }, ips: ['10.0.0.2'], ports: [{ name: 'http', port: 8080 }] }),
  ];
  const policies = [
    policy('prod/allow-http', { podSelector: {}, ingress: [{ ports: [{ port: 'http' }] }] }),
    policy('prod/egress-http', { podSelector: {}, policyTypes: ['Egress'], egress: [{ ports: [{ port: 'http' }] }] }),
  ];

  it('never reaches a rule and is reported as the pod’s problem', () => {
    const model = compileNetworkPolicies({ nodeName: NODE, pods, namespaces, policies });
    const ports = model.policies.flatMap((p) =>
      [...p.ingress.rules, ...p.egress.rules].flatMap((rule) => rule.namedPorts.map((match) => match.port)),
    );
    expect(ports).toEqual([8080, 8080]);
    expect(model.podProblems).toEqual([
      {
        pod: 'prod/web',
        path: 'spec.containers[0].ports[0].containerPort',
        message:
          'named port "http" has containerPort 70000, outside 1..65535; policies naming it do not match it',
      },
    ]);
  });

  it('is reported again when the port changes, and no longer once it is fixed', () => {
    const compiler = new PolicyCompiler({ nodeName: NODE });
    compiler.compile({ pods, namespaces, policies });
    const fixed = [pod('prod/web', { labels: { app: 'web' }, ips: ['10.0.0.1'], ports: [{ name: 'http', port: 80 }] })];
    expect(compiler.compile({ pods: [...fixed, pods[1] as PodLike], namespaces, policies }).podProblems).toEqual([]);
  });
});

describe('a malformed object whose identity coerces to a valid one', () => {
  const valid = policy('prod/web', { podSelector: {}, ingress: [] });
  const impostor = {
    metadata: { namespace: 'prod', name: ['web'] },
    spec: { podSelector: {}, policyTypes: ['Ingress'] },
  } as unknown as NetworkPolicyLike;
  const pods = [pod('prod/web', { labels: { app: 'web' }, ips: ['10.0.0.1'] })];

  it('does not replace the valid policy; it is reported on its own', () => {
    const model = compileNetworkPolicies({ nodeName: NODE, pods, namespaces, policies: [valid, impostor] });
    expect(model.policies.map((p) => p.id)).toEqual(['prod/web']);
    expect(model.problems).toContainEqual(
      expect.objectContaining({ policy: 'prod/<no name>', path: 'metadata', severity: 'error' }),
    );
  });

  it('does not replace the valid pod', () => {
    const impostorPod = { ...pods[0], metadata: { namespace: 'prod', name: ['web'] } } as unknown as PodLike;
    const model = compileNetworkPolicies({
      nodeName: NODE,
      pods: [...pods, impostorPod],
      namespaces,
      policies: [valid],
    });
    expect(model.pods.map((p) => p.id)).toEqual(['prod/web']);
    expect(model.policies[0]?.targets.map((t) => t.pod)).toEqual(['prod/web']);
  });
});

describe('input that cannot be read', () => {
  const hostile = (field: string): object =>
    Object.defineProperty({}, field, {
      enumerable: true,
      get() {
        throw new Error(`no ${field} for you`);
      },
    });
  const good = {
    pods: [pod('prod/web', { labels: { app: 'web' }, ips: ['10.0.0.1'] })],
    namespaces,
    policies: [policy('prod/web', { podSelector: {}, ingress: [] })],
  };

  it.each<[string, Partial<Record<keyof CompileInput, unknown>>]>([
    ['undefined lists', { pods: undefined, namespaces: undefined, policies: undefined }],
    ['lists that are not lists', { pods: 5, namespaces: 'x', policies: {} }],
    ['undefined entries', { pods: [undefined, ...good.pods], namespaces: [undefined], policies: [undefined] }],
    [
      'entries with a throwing getter',
      { pods: [hostile('metadata'), ...good.pods], namespaces: [hostile('metadata')], policies: [hostile('spec')] },
    ],
  ])('compiles the rest when given %s', (_name, override) => {
    const compiler = new PolicyCompiler({ nodeName: NODE });
    const input = { ...good, ...override } as unknown as CompileInput;
    expect(() => compiler.compile(input)).not.toThrow();
    // And again, incrementally, back to the good input.
    expect(compiler.compile(good)).toEqual(compileNetworkPolicies({ nodeName: NODE, ...good }));
  });

  it('fails a policy with a throwing getter closed for its namespace', () => {
    const trap = Object.defineProperty({ metadata: { namespace: 'prod', name: 'trap' } }, 'spec', {
      enumerable: true,
      get() {
        throw new Error('no spec for you');
      },
    }) as NetworkPolicyLike;
    const model = compileNetworkPolicies({ nodeName: NODE, pods: good.pods, namespaces, policies: [trap] });
    expect(model.problems).toEqual([
      { policy: 'prod/trap', severity: 'error', path: '', message: 'the object cannot be read: no spec for you' },
    ]);
    expect(model.pods[0]?.ingress).toEqual({ isolated: true, failClosed: true, policies: ['prod/trap'] });
  });
});

describe('a NUL inside a label value', () => {
  it('is a change like any other for the incremental compile', () => {
    const policies = [
      policy('prod/web', {
        podSelector: { matchLabels: { app: 'web' } },
        ingress: [{ from: [{ podSelector: { matchLabels: { b: 'y' } } }] }],
      }),
    ];
    const web = pod('prod/web', { labels: { app: 'web' }, ips: ['10.0.0.1'] });
    const before = [web, pod('prod/peer', { labels: { a: 'x\0b\0y' }, ips: ['10.0.0.2'] })];
    const after = [web, pod('prod/peer', { labels: { a: 'x', b: 'y' }, ips: ['10.0.0.2'] })];
    const compiler = new PolicyCompiler({ nodeName: NODE });
    compiler.compile({ pods: before, namespaces, policies });
    const incremental = compiler.compile({ pods: after, namespaces, policies });
    expect(incremental).toEqual(compileNetworkPolicies({ nodeName: NODE, pods: after, namespaces, policies }));
    expect(incremental.policies[0]?.ingress.rules[0]?.peers.pods.ipv4).toEqual(['10.0.0.2']);
  });
});
