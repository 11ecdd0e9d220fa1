import { describe, expect, it } from 'vitest';
import { compileNetworkPolicies } from './compiler.js';
import { evaluateFlow } from './evaluate.js';
import type { Protocol } from './model.js';
import { NODE, namespace, pod, policy } from './testing/fixtures.js';
import type { NetworkPolicyLike } from './types.js';

/*
 * NetworkPolicy semantics, table-driven: each case is a set of policies over one small dual-stack cluster and the
 * flows that must pass or not. Flows are judged by evaluateFlow straight from the compiled model.
 */

const namespaces = [
  namespace('prod', { team: 'a', env: 'prod' }),
  namespace('dev', { team: 'b', env: 'dev' }),
  namespace('other'),
];

const pods = [
  pod('prod/web', {
    labels: { app: 'web', tier: 'frontend' },
    ips: ['10.0.0.1', 'fd00::1'],
    ports: [
      { name: 'http', port: 8080 },
      { name: 'metrics', port: 9090 },
      { name: 'dns', port: 53, protocol: 'UDP' },
    ],
  }),
  pod('prod/db', { labels: { app: 'db' }, ips: ['10.0.0.2', 'fd00::2'], ports: [{ name: 'pg', port: 5432 }] }),
  pod('prod/api', {
    labels: { app: 'api', tier: 'backend' },
    ips: ['10.0.1.1', 'fd00:1::1'],
    node: 'node-b',
    ports: [{ name: 'http', port: 8081 }],
  }),
  pod('dev/client', { labels: { app: 'client' }, ips: ['10.0.2.1'] }),
  pod('dev/web', {
    labels: { app: 'web' },
    ips: ['10.0.2.2', 'fd00:2::2'],
    node: 'node-b',
    ports: [{ name: 'http', port: 80 }],
  }),
  pod('dev/api', { labels: { app: 'api' }, ips: ['10.0.2.3'], node: 'node-b' }),
  pod('other/probe', { labels: { app: 'probe', canary: 'true' }, ips: ['10.0.3.1', 'fd00:3::1'], node: 'node-c' }),
  pod('other/hostnet', { labels: { app: 'api' }, ips: ['192.0.2.50'], node: 'node-c', hostNetwork: true }),
  pod('other/done', { labels: { app: 'api' }, ips: ['10.0.3.9'], node: 'node-c', phase: 'Succeeded' }),
];

const ip = {
  web: '10.0.0.1',
  web6: 'fd00::1',
  db: '10.0.0.2',
  db6: 'fd00::2',
  api: '10.0.1.1',
  api6: 'fd00:1::1',
  client: '10.0.2.1',
  devWeb: '10.0.2.2',
  devWeb6: 'fd00:2::2',
  devApi: '10.0.2.3',
  probe: '10.0.3.1',
  probe6: 'fd00:3::1',
  hostnet: '192.0.2.50',
  done: '10.0.3.9',
  outside: '192.168.1.10',
  outside2: '192.168.2.5',
  outside6: '2001:db8::10',
  outside6b: '2001:db8:1::1',
} as const;

type FlowCase = readonly [source: string, destination: string, protocol: Protocol, port: number, allowed: boolean];

interface Case {
  readonly name: string;
  readonly policies: readonly NetworkPolicyLike[];
  readonly flows: readonly FlowCase[];
}

const web = { matchLabels: { app: 'web' } };

const cases: Case[] = [
  {
    name: 'no policy: nothing is isolated',
    policies: [],
    flows: [
      [ip.outside, ip.web, 'TCP', 80, true],
      [ip.web, ip.outside, 'UDP', 53, true],
      [ip.web6, ip.outside6, 'TCP', 443, true],
    ],
  },
  {
    name: 'empty podSelector with ingress: [] denies all ingress to every pod of the namespace, only there',
    policies: [policy('prod/deny', { podSelector: {}, ingress: [] })],
    flows: [
      [ip.outside, ip.web, 'TCP', 80, false],
      [ip.api, ip.db, 'TCP', 5432, false],
      [ip.web6, ip.db6, 'TCP', 5432, false],
      [ip.web, ip.outside, 'TCP', 80, true],
      [ip.outside, ip.client, 'TCP', 80, true],
    ],
  },
  {
    name: 'a policy without ingress rules and without policyTypes denies all ingress',
    policies: [policy('prod/deny', { podSelector: web })],
    flows: [
      [ip.outside, ip.web, 'TCP', 80, false],
      [ip.outside, ip.db, 'TCP', 80, true],
      [ip.web, ip.outside, 'TCP', 80, true],
    ],
  },
  {
    name: 'one empty rule allows all ingress',
    policies: [policy('prod/all', { podSelector: web, ingress: [{}] })],
    flows: [
      [ip.outside, ip.web, 'TCP', 80, true],
      [ip.outside6, ip.web6, 'SCTP', 9, true],
    ],
  },
  {
    name: 'a podSelector-only peer means pods of the policy namespace',
    policies: [
      policy('prod/from-api', {
        podSelector: web,
        ingress: [{ from: [{ podSelector: { matchLabels: { app: 'api' } } }] }],
      }),
    ],
    flows: [
      [ip.api, ip.web, 'TCP', 8080, true],
      [ip.api6, ip.web6, 'TCP', 8080, true],
      [ip.devApi, ip.web, 'TCP', 8080, false],
      [ip.db, ip.web, 'TCP', 8080, false],
      [ip.outside, ip.web, 'TCP', 8080, false],
    ],
  },
  {
    name: 'an empty podSelector peer means every pod of the policy namespace',
    policies: [policy('prod/same-ns', { podSelector: web, ingress: [{ from: [{ podSelector: {} }] }] })],
    flows: [
      [ip.db, ip.web, 'TCP', 1, true],
      [ip.api, ip.web, 'UDP', 1, true],
      [ip.client, ip.web, 'TCP', 1, false],
    ],
  },
  {
    name: 'a namespaceSelector-only peer means every pod of the matching namespaces',
    policies: [
      policy('prod/from-team-b', {
        podSelector: web,
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'b' } } }] }],
      }),
    ],
    flows: [
      [ip.client, ip.web, 'TCP', 8080, true],
      [ip.devWeb, ip.web, 'TCP', 8080, true],
      [ip.devWeb6, ip.web6, 'TCP', 8080, true],
      [ip.api, ip.web, 'TCP', 8080, false],
      [ip.probe, ip.web, 'TCP', 8080, false],
    ],
  },
  {
    name: 'an empty namespaceSelector means every pod of every namespace, but no other address',
    policies: [policy('prod/from-pods', { podSelector: web, ingress: [{ from: [{ namespaceSelector: {} }] }] })],
    flows: [
      [ip.probe, ip.web, 'TCP', 1, true],
      [ip.client, ip.web, 'TCP', 1, true],
      [ip.outside, ip.web, 'TCP', 1, false],
      [ip.hostnet, ip.web, 'TCP', 1, false],
      [ip.done, ip.web, 'TCP', 1, false],
    ],
  },
  {
    name: 'namespaceSelector and podSelector in one peer are ANDed',
    policies: [
      policy('prod/dev-api', {
        podSelector: web,
        ingress: [
          {
            from: [
              { namespaceSelector: { matchLabels: { env: 'dev' } }, podSelector: { matchLabels: { app: 'api' } } },
            ],
          },
        ],
      }),
    ],
    flows: [
      [ip.devApi, ip.web, 'TCP', 8080, true],
      [ip.devWeb, ip.web, 'TCP', 8080, false],
      [ip.api, ip.web, 'TCP', 8080, false],
    ],
  },
  {
    name: 'namespaceSelector and podSelector in two peers are ORed',
    policies: [
      policy('prod/dev-or-api', {
        podSelector: web,
        ingress: [
          {
            from: [
              { namespaceSelector: { matchLabels: { env: 'dev' } } },
              { podSelector: { matchLabels: { app: 'api' } } },
            ],
          },
        ],
      }),
    ],
    flows: [
      [ip.devApi, ip.web, 'TCP', 8080, true],
      [ip.devWeb, ip.web, 'TCP', 8080, true],
      [ip.api, ip.web, 'TCP', 8080, true],
      [ip.db, ip.web, 'TCP', 8080, false],
      [ip.probe, ip.web, 'TCP', 8080, false],
    ],
  },
  {
    name: 'matchExpressions In and NotIn on pods',
    policies: [
      policy('prod/expr', {
        podSelector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['web', 'db'] }] },
        ingress: [
          {
            from: [
              {
                namespaceSelector: {},
                podSelector: { matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['web', 'client'] }] },
              },
            ],
          },
        ],
      }),
    ],
    flows: [
      [ip.api, ip.web, 'TCP', 1, true],
      [ip.api, ip.db, 'TCP', 1, true],
      [ip.probe, ip.db, 'TCP', 1, true],
      [ip.client, ip.db, 'TCP', 1, false],
      [ip.devWeb, ip.db, 'TCP', 1, false],
    ],
  },
  {
    name: 'matchExpressions Exists and DoesNotExist, on pods and namespaces',
    policies: [
      policy('prod/exists', {
        podSelector: { matchExpressions: [{ key: 'tier', operator: 'Exists' }] },
        ingress: [
          {
            from: [
              {
                namespaceSelector: { matchExpressions: [{ key: 'team', operator: 'DoesNotExist' }] },
                podSelector: { matchExpressions: [{ key: 'canary', operator: 'Exists' }] },
              },
            ],
          },
        ],
      }),
    ],
    flows: [
      [ip.probe, ip.web, 'TCP', 1, true],
      [ip.client, ip.web, 'TCP', 1, false],
      [ip.outside, ip.db, 'TCP', 1, true],
    ],
  },
  {
    name: 'matchLabels and matchExpressions in one selector are ANDed',
    policies: [
      policy('prod/and', {
        podSelector: {
          matchLabels: { app: 'web' },
          matchExpressions: [{ key: 'tier', operator: 'In', values: ['backend'] }],
        },
        ingress: [],
      }),
    ],
    flows: [[ip.outside, ip.web, 'TCP', 1, true]],
  },
  {
    name: 'ipBlock with except, per family',
    policies: [
      policy('prod/blocks', {
        podSelector: web,
        ingress: [
          {
            from: [
              { ipBlock: { cidr: '192.168.0.0/16', except: ['192.168.1.0/24'] } },
              { ipBlock: { cidr: '2001:db8::/32', except: ['2001:db8::/64'] } },
            ],
          },
        ],
      }),
    ],
    flows: [
      [ip.outside2, ip.web, 'TCP', 80, true],
      [ip.outside, ip.web, 'TCP', 80, false],
      [ip.outside6b, ip.web6, 'TCP', 80, true],
      [ip.outside6, ip.web6, 'TCP', 80, false],
      [ip.api, ip.web, 'TCP', 80, false],
    ],
  },
  {
    name: 'an IPv4-only rule allows no IPv6 traffic',
    policies: [policy('prod/v4', { podSelector: web, ingress: [{ from: [{ ipBlock: { cidr: '0.0.0.0/0' } }] }] })],
    flows: [
      [ip.outside, ip.web, 'TCP', 80, true],
      [ip.outside6, ip.web6, 'TCP', 80, false],
    ],
  },
  {
    name: 'ports by number; a missing protocol means TCP',
    policies: [policy('prod/port', { podSelector: web, ingress: [{ ports: [{ port: 8080 }] }] })],
    flows: [
      [ip.outside, ip.web, 'TCP', 8080, true],
      [ip.outside6, ip.web6, 'TCP', 8080, true],
      [ip.outside, ip.web, 'TCP', 8081, false],
      [ip.outside, ip.web, 'UDP', 8080, false],
    ],
  },
  {
    name: 'a protocol without a port means every port of it',
    policies: [policy('prod/udp', { podSelector: web, ingress: [{ ports: [{ protocol: 'UDP' }] }] })],
    flows: [
      [ip.outside, ip.web, 'UDP', 1, true],
      [ip.outside, ip.web, 'UDP', 65535, true],
      [ip.outside, ip.web, 'TCP', 1, false],
    ],
  },
  {
    name: 'endPort makes a range, ends included',
    policies: [
      policy('prod/range', {
        podSelector: web,
        ingress: [{ ports: [{ protocol: 'TCP', port: 8000, endPort: 8100 }] }],
      }),
    ],
    flows: [
      [ip.outside, ip.web, 'TCP', 8000, true],
      [ip.outside, ip.web, 'TCP', 8080, true],
      [ip.outside, ip.web, 'TCP', 8100, true],
      [ip.outside, ip.web, 'TCP', 7999, false],
      [ip.outside, ip.web, 'TCP', 8101, false],
    ],
  },
  {
    name: 'SCTP',
    policies: [policy('prod/sctp', { podSelector: web, ingress: [{ ports: [{ protocol: 'SCTP', port: 9000 }] }] })],
    flows: [
      [ip.outside, ip.web, 'SCTP', 9000, true],
      [ip.outside6, ip.web6, 'SCTP', 9000, true],
      [ip.outside, ip.web, 'TCP', 9000, false],
    ],
  },
  {
    name: 'peers and ports of one rule are ANDed',
    policies: [
      policy('prod/and-ports', {
        podSelector: web,
        ingress: [{ from: [{ podSelector: { matchLabels: { app: 'api' } } }], ports: [{ port: 8080 }] }],
      }),
    ],
    flows: [
      [ip.api, ip.web, 'TCP', 8080, true],
      [ip.api, ip.web, 'TCP', 9090, false],
      [ip.db, ip.web, 'TCP', 8080, false],
    ],
  },
  {
    name: 'a named ingress port resolves against the local target pod',
    policies: [
      policy('prod/named', {
        podSelector: web,
        ingress: [{ ports: [{ port: 'http' }, { port: 'dns', protocol: 'UDP' }] }],
      }),
    ],
    flows: [
      [ip.outside, ip.web, 'TCP', 8080, true],
      [ip.outside6, ip.web6, 'TCP', 8080, true],
      [ip.outside, ip.web, 'UDP', 53, true],
      [ip.outside, ip.web, 'TCP', 53, false],
      [ip.outside, ip.web, 'TCP', 80, false],
      [ip.outside, ip.web, 'TCP', 9090, false],
    ],
  },
  {
    name: 'a named ingress port only opens targets that define it',
    policies: [policy('prod/named-all', { podSelector: {}, ingress: [{ ports: [{ port: 'pg' }] }] })],
    flows: [
      [ip.outside, ip.db, 'TCP', 5432, true],
      [ip.outside, ip.web, 'TCP', 5432, false],
    ],
  },
  {
    name: 'a named egress port resolves per peer pod',
    policies: [
      policy('prod/egress-named', {
        podSelector: web,
        policyTypes: ['Egress'],
        egress: [
          {
            to: [
              {
                namespaceSelector: {},
                podSelector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['api', 'web'] }] },
              },
            ],
            ports: [{ port: 'http' }],
          },
        ],
      }),
    ],
    flows: [
      [ip.web, ip.api, 'TCP', 8081, true],
      [ip.web6, ip.api6, 'TCP', 8081, true],
      [ip.web, ip.api, 'TCP', 80, false],
      [ip.web, ip.devWeb, 'TCP', 80, true],
      [ip.web, ip.devWeb, 'TCP', 8081, false],
      [ip.web, ip.devApi, 'TCP', 8081, false],
      [ip.outside, ip.web, 'TCP', 1, true],
    ],
  },
  {
    name: 'a named egress port to any destination resolves against every pod',
    policies: [
      policy('prod/egress-any-named', {
        podSelector: web,
        policyTypes: ['Egress'],
        egress: [{ ports: [{ port: 'http' }] }],
      }),
    ],
    flows: [
      [ip.web, ip.api, 'TCP', 8081, true],
      [ip.web, ip.devWeb, 'TCP', 80, true],
      [ip.web, ip.outside, 'TCP', 80, false],
    ],
  },
  {
    name: 'a named egress port to an ipBlock resolves against the pods inside it',
    policies: [
      policy('prod/egress-block-named', {
        podSelector: web,
        policyTypes: ['Egress'],
        egress: [{ to: [{ ipBlock: { cidr: '10.0.2.0/24' } }], ports: [{ port: 'http' }] }],
      }),
    ],
    flows: [
      [ip.web, ip.devWeb, 'TCP', 80, true],
      [ip.web, ip.api, 'TCP', 8081, false],
      [ip.web6, ip.devWeb6, 'TCP', 80, false],
    ],
  },
  {
    name: 'egress rules without policyTypes isolate egress and ingress',
    policies: [policy('prod/egress-dns', { podSelector: web, egress: [{ ports: [{ protocol: 'UDP', port: 53 }] }] })],
    flows: [
      [ip.web, ip.outside, 'UDP', 53, true],
      [ip.web6, ip.outside6, 'UDP', 53, true],
      [ip.web, ip.outside, 'TCP', 53, false],
      [ip.outside, ip.web, 'TCP', 8080, false],
    ],
  },
  {
    name: 'an empty policyTypes list defaults like a missing one',
    policies: [
      policy('prod/empty-types', {
        podSelector: web,
        policyTypes: [],
        egress: [{ ports: [{ protocol: 'UDP', port: 53 }] }],
      }),
    ],
    flows: [
      [ip.web, ip.outside, 'UDP', 53, true],
      [ip.web, ip.outside, 'TCP', 80, false],
      [ip.outside, ip.web, 'TCP', 8080, false],
    ],
  },
  {
    name: 'policyTypes Egress alone leaves ingress open even with ingress rules',
    policies: [policy('prod/egress-only', { podSelector: web, policyTypes: ['Egress'], ingress: [], egress: [] })],
    flows: [
      [ip.outside, ip.web, 'TCP', 8080, true],
      [ip.web, ip.db, 'TCP', 5432, false],
    ],
  },
  {
    name: 'egress to pods of another node is decided at the source, ingress at the destination',
    policies: [
      policy('prod/egress-to-db', {
        podSelector: web,
        policyTypes: ['Egress'],
        egress: [{ to: [{ podSelector: { matchLabels: { app: 'db' } } }] }],
      }),
      policy('prod/db-ingress', {
        podSelector: { matchLabels: { app: 'db' } },
        ingress: [{ from: [{ podSelector: { matchLabels: { app: 'api' } } }] }],
      }),
    ],
    flows: [
      [ip.web, ip.db, 'TCP', 5432, false],
      [ip.api, ip.db, 'TCP', 5432, true],
      [ip.web, ip.api, 'TCP', 80, false],
    ],
  },
  {
    name: 'several policies add up',
    policies: [
      policy('prod/from-api', {
        podSelector: web,
        ingress: [{ from: [{ podSelector: { matchLabels: { app: 'api' } } }], ports: [{ port: 8080 }] }],
      }),
      policy('prod/from-client', {
        podSelector: { matchLabels: { tier: 'frontend' } },
        ingress: [
          {
            from: [
              { namespaceSelector: { matchLabels: { env: 'dev' } }, podSelector: { matchLabels: { app: 'client' } } },
            ],
            ports: [{ protocol: 'UDP', port: 53 }],
          },
        ],
      }),
    ],
    flows: [
      [ip.api, ip.web, 'TCP', 8080, true],
      [ip.client, ip.web, 'UDP', 53, true],
      [ip.api, ip.web, 'UDP', 53, false],
      [ip.client, ip.web, 'TCP', 8080, false],
    ],
  },
  {
    name: 'host-network and finished pods are no peers',
    policies: [
      policy('prod/from-api-anywhere', {
        podSelector: web,
        ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: 'api' } } }] }],
      }),
    ],
    flows: [
      [ip.api, ip.web, 'TCP', 1, true],
      [ip.devApi, ip.web, 'TCP', 1, true],
      [ip.hostnet, ip.web, 'TCP', 1, false],
      [ip.done, ip.web, 'TCP', 1, false],
    ],
  },
  {
    name: 'a policy in another namespace does not select these pods',
    policies: [policy('dev/deny', { podSelector: {}, ingress: [] })],
    flows: [
      [ip.outside, ip.web, 'TCP', 1, true],
      [ip.outside, ip.client, 'TCP', 1, false],
    ],
  },
];

describe('NetworkPolicy semantics', () => {
  describe.each(cases)('$name', ({ policies, flows }) => {
    const model = compileNetworkPolicies({ nodeName: NODE, pods, namespaces, policies });

    it('compiles without problems', () => {
      expect(model.problems.filter((problem) => problem.severity === 'error')).toEqual([]);
    });

    it.each(
      flows.map((flow) => ({
        flow,
        label: `${flow[0]} -> ${flow[1]} ${flow[2]}/${flow[3]} ${flow[4] ? 'allowed' : 'denied'}`,
      })),
    )('$label', ({ flow: [source, destination, protocol, port, allowed] }) => {
      const verdict = evaluateFlow(model, { source, destination, protocol, port });
      expect(verdict.allowed, JSON.stringify(verdict)).toBe(allowed);
    });
  });
});
