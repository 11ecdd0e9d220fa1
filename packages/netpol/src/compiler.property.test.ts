import { compareText } from './sort.js';
/*
 * Property tests of the compiler's two promises: an incremental compile equals a fresh one after any sequence of
 * changes, and no input, however malformed, makes a compile throw. The clusters are small but dense (few names, few
 * labels, overlapping addresses and blocks), so that random changes keep hitting the same selectors and ports.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PolicyCompiler, compileNetworkPolicies } from './compiler.js';
import type { CompileInput } from './compiler.js';
import { NODE, namespace, pod, policy } from './testing/fixtures.js';
import type { NamespaceLike, NetworkPolicyLike, PodLike } from './types.js';

const NAMESPACES = ['a', 'b'];
const LABEL_KEYS = ['app', 'tier', 'env'];
// A NUL and a separator-looking value are in the pool on purpose: signatures must keep them apart.
const LABEL_VALUES = ['web', 'db', 'x', 'x\0tier\0db', ''];
const IPS = ['10.0.0.1', '10.0.0.2', '10.0.1.1', '10.1.0.1', '192.168.0.9', 'fd00::1', 'fd00::2', 'fd00:1::1'];
const CIDRS = ['10.0.0.0/24', '10.0.0.0/16', '10.0.0.2/32', '0.0.0.0/0', 'fd00::/64', 'fd00::/16', 'fd00::2/128'];
const PORT_NAMES = ['http', 'dns', 'metrics'];
// 0 and 70000 are not ports: the compiler must leave them out of every rule, in both kinds of compile.
const PORT_NUMBERS = [53, 80, 8080, 0, 70_000];

const labels = fc.dictionary(fc.constantFrom(...LABEL_KEYS), fc.constantFrom(...LABEL_VALUES), { maxKeys: 3 });

const podArb: fc.Arbitrary<PodLike> = fc
  .record({
    namespace: fc.constantFrom(...NAMESPACES),
    name: fc.constantFrom('p0', 'p1', 'p2', 'p3', 'p4'),
    labels,
    ips: fc.uniqueArray(fc.constantFrom(...IPS), { maxLength: 2 }),
    node: fc.constantFrom(NODE, 'node-b'),
    ports: fc.array(
      fc.record({
        name: fc.constantFrom(...PORT_NAMES),
        port: fc.constantFrom(...PORT_NUMBERS),
        protocol: fc.constantFrom('TCP', 'TCP', 'UDP'),
      }),
      { maxLength: 2 },
    ),
    phase: fc.constantFrom('Running', 'Running', 'Succeeded'),
  })
  .map(({ namespace: ns, name, ...options }) => pod(`${ns}/${name}`, options));

const namespaceArb: fc.Arbitrary<NamespaceLike> = fc
  .record({ name: fc.constantFrom(...NAMESPACES), labels })
  .map(({ name, labels: extra }) => namespace(name, extra));

const selector = fc.oneof(
  fc.constant({}),
  fc.record({ matchLabels: labels }),
  fc.record({
    matchExpressions: fc.array(
      fc.oneof(
        fc.record({
          key: fc.constantFrom(...LABEL_KEYS),
          operator: fc.constantFrom('In', 'NotIn'),
          values: fc.uniqueArray(fc.constantFrom(...LABEL_VALUES), { minLength: 1, maxLength: 2 }),
        }),
        fc.record({ key: fc.constantFrom(...LABEL_KEYS), operator: fc.constantFrom('Exists', 'DoesNotExist') }),
      ),
      { maxLength: 2 },
    ),
  }),
);

const peer = fc.oneof(
  fc.record({ podSelector: selector }),
  fc.record({ namespaceSelector: selector }),
  fc.record({ namespaceSelector: selector, podSelector: selector }),
  fc.record({ ipBlock: fc.record({ cidr: fc.constantFrom(...CIDRS) }) }),
  fc.constant({ ipBlock: { cidr: '10.0.0.0/16', except: ['10.0.0.0/24'] } }),
);

const port = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({ port: fc.constantFrom(...PORT_NAMES), protocol: fc.constantFrom('TCP', 'UDP') }),
  },
  { weight: 1, arbitrary: fc.record({ port: fc.constantFrom(53, 80, 443) }) },
  { weight: 1, arbitrary: fc.constant({ protocol: 'UDP' }) },
);

const rule = (peerField: 'from' | 'to') =>
  fc.record(
    { [peerField]: fc.array(peer, { maxLength: 3 }), ports: fc.array(port, { maxLength: 2 }) },
    { requiredKeys: [] },
  );

const policyArb: fc.Arbitrary<NetworkPolicyLike> = fc
  .record({
    namespace: fc.constantFrom(...NAMESPACES),
    name: fc.constantFrom('n0', 'n1', 'n2', 'n3'),
    spec: fc.record(
      {
        podSelector: selector,
        policyTypes: fc.subarray(['Ingress', 'Egress']),
        ingress: fc.array(rule('from'), { maxLength: 2 }),
        egress: fc.array(rule('to'), { maxLength: 2 }),
      },
      { requiredKeys: ['podSelector'] },
    ),
  })
  .map(({ namespace: ns, name, spec }) => policy(`${ns}/${name}`, spec));

type Change =
  | { readonly kind: 'pod'; readonly object: PodLike }
  | { readonly kind: 'namespace'; readonly object: NamespaceLike }
  | { readonly kind: 'policy'; readonly object: NetworkPolicyLike }
  | { readonly kind: 'delete'; readonly list: 'pods' | 'namespaces' | 'policies'; readonly index: number }
  /** Only the labels of an existing pod change: what selectors, and signatures, must notice. */
  | { readonly kind: 'relabel'; readonly index: number; readonly labels: Record<string, string> }
  /** A relist: every object arrives again as an equal copy. */
  | { readonly kind: 'relist' };

const changeArb: fc.Arbitrary<Change> = fc.oneof(
  { weight: 4, arbitrary: podArb.map((object) => ({ kind: 'pod' as const, object })) },
  { weight: 1, arbitrary: namespaceArb.map((object) => ({ kind: 'namespace' as const, object })) },
  { weight: 2, arbitrary: policyArb.map((object) => ({ kind: 'policy' as const, object })) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('delete' as const),
      list: fc.constantFrom('pods' as const, 'namespaces' as const, 'policies' as const),
      index: fc.nat(20),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('relabel' as const), index: fc.nat(20), labels }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'relist' as const }) },
);

interface Cluster {
  pods: PodLike[];
  namespaces: NamespaceLike[];
  policies: NetworkPolicyLike[];
}

const idOf = (object: PodLike | NamespaceLike | NetworkPolicyLike) =>
  `${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`;

/** Replaces the object of the same id (an update) or appends it (an add), as an informer's list would show it. */
function upsert<T extends PodLike | NamespaceLike | NetworkPolicyLike>(list: T[], object: T): T[] {
  const index = list.findIndex((existing) => idOf(existing) === idOf(object));
  return index < 0 ? [...list, object] : list.map((existing, i) => (i === index ? object : existing));
}

function apply(cluster: Cluster, change: Change): Cluster {
  switch (change.kind) {
    case 'pod':
      return { ...cluster, pods: upsert(cluster.pods, change.object) };
    case 'namespace':
      return { ...cluster, namespaces: upsert(cluster.namespaces, change.object) };
    case 'policy':
      return { ...cluster, policies: upsert(cluster.policies, change.object) };
    case 'delete': {
      const list = cluster[change.list] as unknown[];
      if (list.length === 0) return cluster;
      const index = change.index % list.length;
      return { ...cluster, [change.list]: list.filter((_, i) => i !== index) };
    }
    case 'relabel': {
      if (cluster.pods.length === 0) return cluster;
      const index = change.index % cluster.pods.length;
      const pods = cluster.pods.map((existing, i) =>
        i === index ? { ...existing, metadata: { ...existing.metadata, labels: change.labels } } : existing,
      );
      return { ...cluster, pods };
    }
    case 'relist':
      return structuredClone(cluster);
  }
}

const clusterArb: fc.Arbitrary<Cluster> = fc.record({
  pods: fc.array(podArb, { maxLength: 8 }),
  namespaces: fc.array(namespaceArb, { maxLength: 3 }),
  policies: fc.array(policyArb, { maxLength: 4 }),
});

describe('PolicyCompiler properties', () => {
  it('an incremental compile equals a fresh compile after every change of a random sequence', () => {
    fc.assert(
      fc.property(clusterArb, fc.array(changeArb, { minLength: 1, maxLength: 40 }), (initial, changes) => {
        const compiler = new PolicyCompiler({ nodeName: NODE });
        let cluster = initial;
        expect(compiler.compile(cluster)).toEqual(compileNetworkPolicies({ nodeName: NODE, ...cluster }));
        for (const change of changes) {
          cluster = apply(cluster, change);
          const incremental = compiler.compile(cluster);
          expect(incremental).toEqual(compileNetworkPolicies({ nodeName: NODE, ...cluster }));
        }
      }),
      { numRuns: 400 },
    );
  });

  it('gives every rule its peer pod addresses sorted and without duplicates, which backends rely on', () => {
    fc.assert(
      fc.property(clusterArb, (cluster) => {
        for (const policy of compileNetworkPolicies({ nodeName: NODE, ...cluster }).policies) {
          for (const rule of [...policy.ingress.rules, ...policy.egress.rules]) {
            for (const ips of [rule.peers.pods.ipv4, rule.peers.pods.ipv6]) {
              expect(ips).toEqual([...new Set(ips)].sort(compareText));
            }
          }
        }
      }),
      { numRuns: 200 },
    );
  });

  it('never throws, whatever the input, and recovers on the next good input', () => {
    // Almost-valid objects with arbitrary values in their fields reach deeper than arbitrary values alone.
    const mangled = <T>(valid: fc.Arbitrary<T>) =>
      fc.oneof(
        valid,
        fc.anything(),
        fc.tuple(valid, fc.constantFrom('metadata', 'spec', 'status'), fc.anything()).map(([object, field, value]) => ({
          ...(object as object),
          [field]: value,
        })),
      );
    const inputArb = fc.oneof(
      fc.anything(),
      fc.record({
        pods: fc.oneof(fc.array(mangled(podArb), { maxLength: 6 }), fc.anything()),
        namespaces: fc.oneof(fc.array(mangled(namespaceArb), { maxLength: 3 }), fc.anything()),
        policies: fc.oneof(fc.array(mangled(policyArb), { maxLength: 4 }), fc.anything()),
      }),
    );
    fc.assert(
      fc.property(fc.array(inputArb, { minLength: 1, maxLength: 4 }), clusterArb, (inputs, good) => {
        const compiler = new PolicyCompiler({ nodeName: NODE });
        for (const input of inputs) compiler.compile(input as CompileInput);
        expect(compiler.compile(good)).toEqual(compileNetworkPolicies({ nodeName: NODE, ...good }));
      }),
      { numRuns: 500 },
    );
  });
});
