import { describe, expect, it } from 'vitest';
import { compileNetworkPolicies } from './compiler.js';
import { evaluateFlow } from './evaluate.js';
import { NODE, namespace, pod, policy } from './testing/fixtures.js';
import type { NetworkPolicyLike } from './types.js';

const namespaces = [namespace('prod')];
const pods = [
  pod('prod/web', { labels: { app: 'web' }, ips: ['10.0.0.1', 'fd00::1'], ports: [{ name: 'http', port: 8080 }] }),
  pod('prod/other', { labels: { app: 'other' }, ips: ['10.0.0.2'] }),
  pod('prod/peer', { labels: { app: 'peer' }, ips: ['10.0.0.3'], node: 'node-b' }),
];
const good = policy('prod/good', {
  podSelector: { matchLabels: { app: 'other' } },
  ingress: [{ from: [{ podSelector: {} }] }],
});
const web = { matchLabels: { app: 'web' } };

interface ErrorCase {
  readonly name: string;
  readonly spec: unknown;
  readonly path: string;
  readonly message: RegExp;
  /** Which directions of prod/web fail closed. */
  readonly failed: { readonly ingress: boolean; readonly egress: boolean };
  /** The targets, when the error hides the policy's own podSelector: then every local pod of the namespace. */
  readonly targets?: readonly string[];
}

const ingressOnly = { ingress: true, egress: false };
const egressOnly = { ingress: false, egress: true };
const both = { ingress: true, egress: true };
const ingressRule = (rule: unknown) => ({ podSelector: web, ingress: [rule] });
const egressRule = (rule: unknown) => ({ podSelector: web, policyTypes: ['Egress'], egress: [rule] });
const fromPeer = (peer: unknown) => ingressRule({ from: [peer] });
const onPort = (port: unknown) => ingressRule({ ports: [port] });

const errorCases: ErrorCase[] = [
  {
    name: 'a bad CIDR',
    spec: fromPeer({ ipBlock: { cidr: '10.0.0.300/8' } }),
    path: 'spec.ingress[0].from[0].ipBlock.cidr',
    message: /invalid address/,
    failed: ingressOnly,
  },
  {
    name: 'a CIDR without prefix',
    spec: fromPeer({ ipBlock: { cidr: '10.0.0.0' } }),
    path: 'spec.ingress[0].from[0].ipBlock.cidr',
    message: /missing \/prefix/,
    failed: ingressOnly,
  },
  {
    name: 'a prefix too long',
    spec: fromPeer({ ipBlock: { cidr: 'fd00::/129' } }),
    path: 'spec.ingress[0].from[0].ipBlock.cidr',
    message: /prefix length must be 0..128/,
    failed: ingressOnly,
  },
  {
    name: 'an IPv4 address with leading zeros',
    spec: fromPeer({ ipBlock: { cidr: '010.0.0.0/8' } }),
    path: 'spec.ingress[0].from[0].ipBlock.cidr',
    message: /invalid address/,
    failed: ingressOnly,
  },
  {
    name: 'an except outside its cidr',
    spec: fromPeer({ ipBlock: { cidr: '10.0.0.0/16', except: ['10.1.0.0/24'] } }),
    path: 'spec.ingress[0].from[0].ipBlock.except[0]',
    message: /not strictly inside 10.0.0.0\/16/,
    failed: ingressOnly,
  },
  {
    name: 'an except equal to its cidr',
    spec: fromPeer({ ipBlock: { cidr: '10.0.0.0/16', except: ['10.0.0.0/16'] } }),
    path: 'spec.ingress[0].from[0].ipBlock.except[0]',
    message: /not strictly inside/,
    failed: ingressOnly,
  },
  {
    name: 'an except of the other family',
    spec: fromPeer({ ipBlock: { cidr: '10.0.0.0/8', except: ['fd00::/64'] } }),
    path: 'spec.ingress[0].from[0].ipBlock.except[0]',
    message: /same IP family/,
    failed: ingressOnly,
  },
  {
    name: 'an ipBlock combined with a selector',
    spec: fromPeer({ ipBlock: { cidr: '10.0.0.0/8' }, podSelector: {} }),
    path: 'spec.ingress[0].from[0]',
    message: /cannot be combined/,
    failed: ingressOnly,
  },
  {
    name: 'an empty peer',
    spec: fromPeer({}),
    path: 'spec.ingress[0].from[0]',
    message: /needs podSelector, namespaceSelector or ipBlock/,
    failed: ingressOnly,
  },
  {
    name: 'an unknown peer field',
    spec: fromPeer({ serviceAccountSelector: {} }),
    path: 'spec.ingress[0].from[0].serviceAccountSelector',
    message: /unsupported field/,
    failed: ingressOnly,
  },
  {
    name: 'a bad selector operator',
    spec: fromPeer({ podSelector: { matchExpressions: [{ key: 'app', operator: 'Equals', values: ['x'] }] } }),
    path: 'spec.ingress[0].from[0].podSelector.matchExpressions[0].operator',
    message: /unsupported operator "Equals"/,
    failed: ingressOnly,
  },
  {
    name: 'In without values',
    spec: fromPeer({ podSelector: { matchExpressions: [{ key: 'app', operator: 'In', values: [] }] } }),
    path: 'spec.ingress[0].from[0].podSelector.matchExpressions[0].values',
    message: /at least one value/,
    failed: ingressOnly,
  },
  {
    name: 'Exists with values',
    spec: fromPeer({ namespaceSelector: { matchExpressions: [{ key: 'app', operator: 'Exists', values: ['x'] }] } }),
    path: 'spec.ingress[0].from[0].namespaceSelector.matchExpressions[0].values',
    message: /takes no values/,
    failed: ingressOnly,
  },
  {
    name: 'a label value that is not a string',
    spec: fromPeer({ podSelector: { matchLabels: { app: 1 } } }),
    path: 'spec.ingress[0].from[0].podSelector.matchLabels.app',
    message: /must be a string/,
    failed: ingressOnly,
  },
  {
    name: 'an unsupported protocol',
    spec: onPort({ protocol: 'ICMP', port: 1 }),
    path: 'spec.ingress[0].ports[0].protocol',
    message: /unsupported protocol "ICMP"/,
    failed: ingressOnly,
  },
  {
    name: 'a lower-case protocol',
    spec: onPort({ protocol: 'tcp', port: 1 }),
    path: 'spec.ingress[0].ports[0].protocol',
    message: /unsupported protocol "tcp"/,
    failed: ingressOnly,
  },
  {
    name: 'port 0',
    spec: onPort({ port: 0 }),
    path: 'spec.ingress[0].ports[0].port',
    message: /1..65535/,
    failed: ingressOnly,
  },
  {
    name: 'a port above 65535',
    spec: onPort({ port: 70000 }),
    path: 'spec.ingress[0].ports[0].port',
    message: /1..65535/,
    failed: ingressOnly,
  },
  {
    name: 'a fractional port',
    spec: onPort({ port: 80.5 }),
    path: 'spec.ingress[0].ports[0].port',
    message: /1..65535/,
    failed: ingressOnly,
  },
  {
    name: 'a numeric string port',
    spec: onPort({ port: '80' }),
    path: 'spec.ingress[0].ports[0].port',
    message: /neither a port number nor a valid port name/,
    failed: ingressOnly,
  },
  {
    name: 'an upper-case port name',
    spec: onPort({ port: 'HTTP' }),
    path: 'spec.ingress[0].ports[0].port',
    message: /valid port name/,
    failed: ingressOnly,
  },
  {
    name: 'a port name with a double dash',
    spec: onPort({ port: 'a--b' }),
    path: 'spec.ingress[0].ports[0].port',
    message: /valid port name/,
    failed: ingressOnly,
  },
  {
    name: 'a port name over 15 characters',
    spec: onPort({ port: 'abcdefghijklmnop' }),
    path: 'spec.ingress[0].ports[0].port',
    message: /valid port name/,
    failed: ingressOnly,
  },
  {
    name: 'endPort below port',
    spec: onPort({ port: 100, endPort: 99 }),
    path: 'spec.ingress[0].ports[0].endPort',
    message: /below port 100/,
    failed: ingressOnly,
  },
  {
    name: 'endPort without port',
    spec: onPort({ endPort: 99 }),
    path: 'spec.ingress[0].ports[0].endPort',
    message: /needs a numeric port/,
    failed: ingressOnly,
  },
  {
    name: 'endPort with a named port',
    spec: onPort({ port: 'http', endPort: 9000 }),
    path: 'spec.ingress[0].ports[0].endPort',
    message: /needs a numeric port/,
    failed: ingressOnly,
  },
  {
    name: 'endPort above 65535',
    spec: onPort({ port: 100, endPort: 65536 }),
    path: 'spec.ingress[0].ports[0].endPort',
    message: /1..65535/,
    failed: ingressOnly,
  },
  {
    name: 'ports that are not a list',
    spec: ingressRule({ ports: { port: 80 } }),
    path: 'spec.ingress[0].ports',
    message: /expected a list of ports/,
    failed: ingressOnly,
  },
  {
    name: 'from that is not a list',
    spec: ingressRule({ from: { podSelector: {} } }),
    path: 'spec.ingress[0].from',
    message: /expected a list of peers/,
    failed: ingressOnly,
  },
  {
    name: 'a rule that is not an object',
    spec: ingressRule('allow'),
    path: 'spec.ingress[0]',
    message: /expected a rule/,
    failed: ingressOnly,
  },
  {
    name: 'an unknown rule field',
    spec: ingressRule({ from: [], action: 'deny' }),
    path: 'spec.ingress[0].action',
    message: /unsupported field "action"/,
    failed: ingressOnly,
  },
  {
    name: 'egress rules with `from`',
    spec: egressRule({ from: [] }),
    path: 'spec.egress[0].from',
    message: /unsupported field "from"/,
    failed: egressOnly,
  },
  {
    name: 'an error in an egress peer',
    spec: egressRule({ to: [{ ipBlock: { cidr: 'nope' } }] }),
    path: 'spec.egress[0].to[0].ipBlock.cidr',
    message: /not a CIDR/,
    failed: egressOnly,
  },
  {
    name: 'ingress that is not a list',
    spec: { podSelector: web, ingress: {} },
    path: 'spec.ingress',
    message: /expected a list of rules/,
    failed: ingressOnly,
  },
  {
    name: 'egress that is not a list, without policyTypes',
    spec: { podSelector: web, ingress: [{}], egress: { to: [] } },
    path: 'spec.egress',
    message: /expected a list of rules/,
    failed: egressOnly,
  },
  {
    name: 'an unknown policy type',
    spec: { podSelector: web, policyTypes: ['Ingress', 'Forward'] },
    path: 'spec.policyTypes[1]',
    message: /unsupported policy type "Forward"/,
    failed: both,
  },
  {
    name: 'an unknown spec field',
    spec: { podSelector: web, ingress: [], priority: 10 },
    path: 'spec.priority',
    message: /unsupported field "priority"/,
    failed: both,
  },
  {
    name: 'a spec that is not an object',
    spec: 'deny',
    path: 'spec',
    message: /expected an object/,
    failed: both,
    targets: ['prod/other', 'prod/web'],
  },
];

describe('invalid policies', () => {
  describe.each(errorCases)('$name', ({ spec, path, message, failed, targets = ['prod/web'] }) => {
    const model = compileNetworkPolicies({
      nodeName: NODE,
      pods,
      namespaces,
      policies: [policy('prod/bad', spec), good],
    });
    const bad = model.policies.find((candidate) => candidate.id === 'prod/bad');
    const webPod = model.pods.find((candidate) => candidate.id === 'prod/web');

    it('is reported with its path', () => {
      const errors = model.problems.filter((problem) => problem.severity === 'error');
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatchObject({ policy: 'prod/bad', path });
      expect(errors[0]?.message).toMatch(message);
    });

    it('fails its targets closed in the affected directions only', () => {
      expect(bad?.targets.map((target) => target.pod)).toEqual(targets);
      expect({ ingress: bad?.ingress.failClosed, egress: bad?.egress.failClosed }).toEqual(failed);
      expect({ ingress: webPod?.ingress.failClosed, egress: webPod?.egress.failClosed }).toEqual(failed);
      if (failed.ingress) expect(bad?.ingress.rules).toEqual([]);
      const verdict = evaluateFlow(model, { source: '10.0.0.3', destination: '10.0.0.1', protocol: 'TCP', port: 8080 });
      expect(verdict.ingress === 'fail-closed').toBe(failed.ingress);
    });

    it('leaves other policies alone', () => {
      const other = model.policies.find((candidate) => candidate.id === 'prod/good');
      expect(other?.ingress).toMatchObject({ isolates: true, failClosed: false });
      expect(other?.ingress.rules[0]?.peers.pods.ipv4).toEqual(['10.0.0.1', '10.0.0.2', '10.0.0.3']);
    });
  });

  it('reports every error of a policy, not only the first', () => {
    const model = compileNetworkPolicies({
      nodeName: NODE,
      pods,
      namespaces,
      policies: [
        policy('prod/bad', {
          podSelector: web,
          ingress: [{ from: [{}], ports: [{ port: 0 }] }, { from: [{ ipBlock: { cidr: 'x' } }] }],
        }),
      ],
    });
    expect(model.problems.map((problem) => problem.path)).toEqual([
      'spec.ingress[0].from[0]',
      'spec.ingress[0].ports[0].port',
      'spec.ingress[1].from[0].ipBlock.cidr',
    ]);
  });

  it('fails every pod of the namespace closed when the podSelector itself is invalid', () => {
    const model = compileNetworkPolicies({
      nodeName: NODE,
      pods,
      namespaces,
      policies: [
        policy('prod/bad', {
          podSelector: { matchExpressions: [{ key: 'app', operator: 'Has' }] },
          policyTypes: ['Egress'],
        }),
        good,
      ],
    });
    expect(model.problems).toMatchObject([
      { policy: 'prod/bad', severity: 'error', path: 'spec.podSelector.matchExpressions[0].operator' },
    ]);
    const bad = model.policies.find((candidate) => candidate.id === 'prod/bad');
    expect(bad?.targets.map((target) => target.pod)).toEqual(['prod/other', 'prod/web']);
    expect([bad?.ingress.failClosed, bad?.egress.failClosed]).toEqual([false, true]);
  });

  it('cannot select anything without a namespace or name, and says so', () => {
    const model = compileNetworkPolicies({
      nodeName: NODE,
      pods,
      namespaces,
      policies: [{ metadata: { name: 'x' }, spec: {} } as NetworkPolicyLike],
    });
    expect(model.problems).toMatchObject([{ severity: 'error', path: 'metadata' }]);
    expect(model.policies).toEqual([]);
  });
});

describe('warnings', () => {
  it('a named port that matches nothing allows nothing, without failing the policy', () => {
    const model = compileNetworkPolicies({
      nodeName: NODE,
      pods,
      namespaces,
      policies: [
        policy('prod/named', {
          podSelector: web,
          ingress: [{ ports: [{ port: 'nope' }, { port: 'http' }, { port: 9000 }] }],
        }),
      ],
    });
    expect(model.problems).toEqual([
      {
        policy: 'prod/named',
        severity: 'warning',
        direction: 'ingress',
        path: 'spec.ingress[0].ports[0]',
        message: 'named port nope/TCP matches no container port of the selected local pods, so it allows nothing',
      },
    ]);
    const verdict = (port: number) =>
      evaluateFlow(model, { source: '10.0.0.3', destination: '10.0.0.1', protocol: 'TCP', port }).allowed;
    expect([verdict(8080), verdict(9000), verdict(1)]).toEqual([true, true, false]);
    expect(model.pods.find((candidate) => candidate.id === 'prod/web')?.ingress.failClosed).toBe(false);
  });

  it('a named egress port that no peer defines is a warning too', () => {
    const model = compileNetworkPolicies({
      nodeName: NODE,
      pods,
      namespaces,
      policies: [
        policy('prod/named', {
          podSelector: web,
          policyTypes: ['Egress'],
          egress: [{ to: [{ podSelector: {} }], ports: [{ port: 'dns', protocol: 'UDP' }] }],
        }),
      ],
    });
    expect(model.problems).toMatchObject([
      { severity: 'warning', direction: 'egress', message: /dns\/UDP matches no container port of the peer pods/ },
    ]);
    expect(model.policies[0]?.egress.rules[0]).toMatchObject({ allPorts: false, ports: [], namedPorts: [] });
  });

  it('a CIDR with host bits is normalised and reported', () => {
    const model = compileNetworkPolicies({
      nodeName: NODE,
      pods,
      namespaces,
      policies: [
        policy('prod/hostbits', {
          podSelector: web,
          ingress: [{ from: [{ ipBlock: { cidr: '192.168.1.7/16', except: ['FD00::1:0/112'] } }] }],
        }),
      ],
    });
    expect(model.problems).toMatchObject([
      {
        severity: 'warning',
        path: 'spec.ingress[0].from[0].ipBlock.cidr',
        message: '192.168.1.7/16 has host bits set; using 192.168.0.0/16',
      },
      {
        severity: 'error',
        path: 'spec.ingress[0].from[0].ipBlock.except[0]',
        message: 'fd00::1:0/112 is not of the same IP family as 192.168.0.0/16',
      },
    ]);
  });

  it('ingress rules of an egress-only policy are ignored with a warning', () => {
    const model = compileNetworkPolicies({
      nodeName: NODE,
      pods,
      namespaces,
      policies: [policy('prod/egress', { podSelector: web, policyTypes: ['Egress'], ingress: [{}] })],
    });
    expect(model.problems).toMatchObject([
      { severity: 'warning', path: 'spec.ingress', message: /policyTypes does not include Ingress/ },
    ]);
    expect(model.policies[0]?.ingress).toEqual({ isolates: false, failClosed: false, rules: [] });
  });
});
