import { describe, expect, it } from 'vitest';
import { compileNetworkPolicies } from './compiler.js';
import { fingerprintOf } from './fingerprint.js';
import { peersInFamily } from './family.js';
import { NODE, namespace, pod, policy, seededRandom } from './testing/fixtures.js';

const namespaces = [namespace('prod', { env: 'prod' }), namespace('dev', { env: 'dev' })];
const pods = [
  pod('prod/web-1', { labels: { app: 'web' }, ips: ['10.0.0.1', 'fd00::1'], ports: [{ name: 'http', port: 8080 }] }),
  pod('prod/web-2', { labels: { app: 'web' }, ips: ['10.0.0.2'], ports: [{ name: 'http', port: 8443 }] }),
  pod('prod/web-3', { labels: { app: 'web' }, ips: ['10.0.0.3'], node: 'node-b' }),
  pod('prod/api', {
    labels: { app: 'api' },
    ips: ['fd00::9', '10.0.0.9'],
    node: 'node-b',
    ports: [{ name: 'grpc', port: 9000 }],
  }),
  pod('dev/api', { labels: { app: 'api' }, ips: ['10.1.0.9'], node: 'node-b', ports: [{ name: 'grpc', port: 9001 }] }),
  pod('dev/tool', { labels: { app: 'tool' }, ips: ['10.1.0.7', 'fd01::7'] }),
];
const policies = [
  policy('prod/web', {
    podSelector: { matchLabels: { app: 'web' } },
    ingress: [
      {
        from: [
          { podSelector: { matchLabels: { app: 'api' } } },
          { ipBlock: { cidr: 'fd10::/16', except: ['fd10:1::/32'] } },
          { ipBlock: { cidr: '192.168.0.0/16', except: ['192.168.2.0/24', '192.168.1.0/24'] } },
        ],
        ports: [
          { port: 'http' },
          { protocol: 'UDP', port: 53 },
          { port: 80, endPort: 80 },
          { protocol: 'SCTP', port: 100, endPort: 200 },
        ],
      },
    ],
    egress: [
      { to: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: 'api' } } }], ports: [{ port: 'grpc' }] },
    ],
  }),
  policy('prod/remote-only', { podSelector: { matchLabels: { app: 'api' } }, ingress: [] }),
  policy('dev/deny-egress', { podSelector: {}, policyTypes: ['Egress'] }),
];

describe('the compiled model', () => {
  const model = compileNetworkPolicies({ nodeName: NODE, pods, namespaces, policies });
  const web = model.policies.find((candidate) => candidate.id === 'prod/web')!;

  it('holds only policies with local targets, sorted by id', () => {
    expect(model.policies.map((candidate) => candidate.id)).toEqual(['dev/deny-egress', 'prod/web']);
  });

  it('lists the local targets with their IPs per family', () => {
    expect(web.targets).toEqual([
      { pod: 'prod/web-1', ips: { ipv4: ['10.0.0.1'], ipv6: ['fd00::1'] } },
      { pod: 'prod/web-2', ips: { ipv4: ['10.0.0.2'], ipv6: [] } },
    ]);
    expect(web.targetIPs).toEqual({ ipv4: ['10.0.0.1', '10.0.0.2'], ipv6: ['fd00::1'] });
  });

  it('resolves selector peers to pod IPs and keeps ipBlocks per family', () => {
    const [rule] = web.ingress.rules;
    expect(rule?.peers).toEqual({
      any: false,
      podsKey: 'namespace prod/pods{"app"="api"}',
      pods: { ipv4: ['10.0.0.9'], ipv6: ['fd00::9'] },
      ipBlocks: {
        ipv4: [{ cidr: '192.168.0.0/16', except: ['192.168.1.0/24', '192.168.2.0/24'] }],
        ipv6: [{ cidr: 'fd10::/16', except: ['fd10:1::/32'] }],
      },
    });
  });

  it('keys the peer pods by their selectors: equal in any policy for the same selection, whatever the peer order', () => {
    const api = { podSelector: { matchLabels: { app: 'api' } } };
    const tools = { namespaceSelector: { matchLabels: { env: 'dev' } }, podSelector: { matchLabels: { app: 'tool' } } };
    const model = compileNetworkPolicies({
      nodeName: NODE,
      pods,
      namespaces,
      policies: [
        policy('prod/a', { podSelector: {}, ingress: [{ from: [api, tools] }] }),
        policy('prod/b', { podSelector: { matchLabels: { app: 'web' } }, ingress: [{ from: [tools, api, api] }], egress: [{ to: [api] }] }),
        policy('prod/c', { podSelector: {}, ingress: [{ from: [api] }] }),
        policy('dev/d', { podSelector: {}, ingress: [{ from: [api] }] }),
      ],
    });
    const key = (id: string, direction: 'ingress' | 'egress' = 'ingress') =>
      model.policies.find((candidate) => candidate.id === id)?.[direction].rules[0]?.peers.podsKey;
    expect(key('prod/a')).toBe(key('prod/b'));
    expect(key('prod/b', 'egress')).toBe(key('prod/c'));
    expect(key('prod/c')).not.toBe(key('prod/a'));
    // The same pod selector in another namespace selects other pods.
    expect(key('dev/d')).not.toBe(key('prod/c'));
    const pods4 = (id: string) => model.policies.find((candidate) => candidate.id === id)?.ingress.rules[0]?.peers.pods.ipv4;
    expect(pods4('dev/d')).not.toEqual(pods4('prod/c'));
  });

  it('keys a malformed namespace so that it cannot spell another rule\'s peers', () => {
    // Joined by a newline, a rule's two peers in namespace x/good read like one peer of a namespace named after them.
    const forged = 'x/pods{}\nnamespaces{}';
    const inForged = <T extends { metadata?: object }>(object: T): T => ({ ...object, metadata: { ...object.metadata, namespace: forged } });
    const model = compileNetworkPolicies({
      nodeName: NODE,
      pods: [inForged(pod('any/p', { ips: ['10.9.9.9'] })), pod('x/good', { ips: ['10.0.0.1'] })],
      namespaces: [],
      policies: [
        inForged(policy('any/a', { podSelector: {}, ingress: [{ from: [{ podSelector: {} }] }] })),
        policy('x/good', { podSelector: {}, ingress: [{ from: [{ podSelector: {} }, { namespaceSelector: {}, podSelector: {} }] }] }),
      ],
    });
    const keys = model.policies.map((compiled) => compiled.ingress.rules[0]?.peers.podsKey);
    expect(keys).toHaveLength(2);
    expect(keys[0]).not.toBe(keys[1]);
  });

  it('sorts numeric ports by protocol and port, folding a one-port range', () => {
    expect(web.ingress.rules[0]?.allPorts).toBe(false);
    expect(web.ingress.rules[0]?.ports).toEqual([
      { protocol: 'TCP', port: 80 },
      { protocol: 'UDP', port: 53 },
      { protocol: 'SCTP', port: 100, endPort: 200 },
    ]);
  });

  it('resolves a named ingress port per target pod', () => {
    expect(web.ingress.rules[0]?.namedPorts).toEqual([
      { name: 'http', protocol: 'TCP', port: 8080, destinations: { ipv4: ['10.0.0.1'], ipv6: ['fd00::1'] } },
      { name: 'http', protocol: 'TCP', port: 8443, destinations: { ipv4: ['10.0.0.2'], ipv6: [] } },
    ]);
  });

  it('resolves a named egress port per peer pod', () => {
    expect(web.egress.rules[0]?.namedPorts).toEqual([
      { name: 'grpc', protocol: 'TCP', port: 9000, destinations: { ipv4: ['10.0.0.9'], ipv6: ['fd00::9'] } },
      { name: 'grpc', protocol: 'TCP', port: 9001, destinations: { ipv4: ['10.1.0.9'], ipv6: [] } },
    ]);
    expect(web.egress.rules[0]?.ports).toEqual([]);
  });

  it('marks isolation per direction and the defaulted policyTypes', () => {
    expect([web.ingress.isolates, web.egress.isolates]).toEqual([true, true]);
    const deny = model.policies.find((candidate) => candidate.id === 'dev/deny-egress')!;
    expect(deny.ingress).toEqual({ isolates: false, failClosed: false, rules: [] });
    expect(deny.egress).toEqual({ isolates: true, failClosed: false, rules: [] });
  });

  it('lists every local pod with the policies isolating it', () => {
    expect(model.pods.map((local) => [local.id, local.ingress.policies, local.egress.policies])).toEqual([
      ['dev/tool', [], ['dev/deny-egress']],
      ['prod/web-1', ['prod/web'], ['prod/web']],
      ['prod/web-2', ['prod/web'], ['prod/web']],
    ]);
    expect(model.pods[0]).toMatchObject({
      ips: { ipv4: ['10.1.0.7'], ipv6: ['fd01::7'] },
      ingress: { isolated: false, failClosed: false },
      egress: { isolated: true, failClosed: false },
    });
  });

  it('gives per-family peers to renderers, where an empty family is not "any"', () => {
    const [rule] = web.ingress.rules;
    expect(peersInFamily(rule!, 'ipv6')).toMatchObject({ any: false, empty: false, pods: ['fd00::9'] });
    const v4only = compileNetworkPolicies({
      nodeName: NODE,
      pods,
      namespaces,
      policies: [policy('prod/v4', { podSelector: {}, ingress: [{ from: [{ ipBlock: { cidr: '10.0.0.0/8' } }] }] })],
    });
    expect(peersInFamily(v4only.policies[0]!.ingress.rules[0]!, 'ipv6')).toEqual({
      any: false,
      pods: [],
      ipBlocks: [],
      empty: true,
    });
  });

  it('is identical whatever order the input comes in', () => {
    const random = seededRandom(7);
    const shuffle = <T>(items: readonly T[]) =>
      items
        .map((item) => ({ item, key: random() }))
        .sort((a, b) => a.key - b.key)
        .map(({ item }) => item);
    for (let round = 0; round < 5; round++) {
      const again = compileNetworkPolicies({
        nodeName: NODE,
        pods: shuffle(pods),
        namespaces: shuffle(namespaces),
        policies: shuffle(policies),
      });
      expect(JSON.stringify(again)).toBe(JSON.stringify(model));
    }
  });

  it('fingerprints each policy by content', () => {
    const changed = compileNetworkPolicies({
      nodeName: NODE,
      pods: pods.map((p) =>
        p.metadata?.name === 'api' && p.metadata.namespace === 'prod'
          ? pod('prod/api', { labels: { app: 'api' }, ips: ['10.0.0.10'], node: 'node-b' })
          : p,
      ),
      namespaces,
      policies,
    });
    const before = new Map(model.policies.map((candidate) => [candidate.id, candidate.fingerprint]));
    const after = new Map(changed.policies.map((candidate) => [candidate.id, candidate.fingerprint]));
    expect(after.get('dev/deny-egress')).toBe(before.get('dev/deny-egress'));
    expect(after.get('prod/web')).not.toBe(before.get('prod/web'));
    expect(changed.fingerprint).not.toBe(model.fingerprint);
  });

  it("fingerprints a policy as fingerprintOf does its fields, in their order, and lists only those fields", () => {
    const fields = ['id', 'namespace', 'name', 'targets', 'targetIPs', 'ingress', 'egress'] as const;
    for (const compiled of model.policies) {
      expect(Object.keys(compiled)).toEqual(fields);
      const plain = Object.fromEntries(fields.map((field) => [field, compiled[field]]));
      expect(compiled.fingerprint).toBe(fingerprintOf(plain));
    }
  });
});
