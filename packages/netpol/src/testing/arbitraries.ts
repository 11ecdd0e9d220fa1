/*
 * Small but dense random clusters for property tests (few names, few labels, overlapping addresses and blocks), so
 * that random changes keep hitting the same selectors and ports. Shared by the compiler's and explain's properties.
 */
import fc from 'fast-check';
import type { NamespaceLike, NetworkPolicyLike, PodLike } from '../types.js';
import { NODE, namespace, pod, policy } from './fixtures.js';

export const NAMESPACES = ['a', 'b'];
const LABEL_KEYS = ['app', 'tier', 'env'];
// A NUL and a separator-looking value are in the pool on purpose: signatures must keep them apart.
const LABEL_VALUES = ['web', 'db', 'x', 'x\0tier\0db', ''];
export const IPS = ['10.0.0.1', '10.0.0.2', '10.0.1.1', '10.1.0.1', '192.168.0.9', 'fd00::1', 'fd00::2', 'fd00:1::1'];
const CIDRS = ['10.0.0.0/24', '10.0.0.0/16', '10.0.0.2/32', '0.0.0.0/0', 'fd00::/64', 'fd00::/16', 'fd00::2/128'];
const PORT_NAMES = ['http', 'dns', 'metrics'];
// 0 and 70000 are not ports: the compiler must leave them out of every rule, in both kinds of compile.
const PORT_NUMBERS = [53, 80, 8080, 0, 70_000];

export const labels = fc.dictionary(fc.constantFrom(...LABEL_KEYS), fc.constantFrom(...LABEL_VALUES), { maxKeys: 3 });

export const podArb: fc.Arbitrary<PodLike> = fc
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

export const namespaceArb: fc.Arbitrary<NamespaceLike> = fc
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

export const policyArb: fc.Arbitrary<NetworkPolicyLike> = fc
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

export interface Cluster {
  pods: PodLike[];
  namespaces: NamespaceLike[];
  policies: NetworkPolicyLike[];
}

export const clusterArb: fc.Arbitrary<Cluster> = fc.record({
  pods: fc.array(podArb, { maxLength: 8 }),
  namespaces: fc.array(namespaceArb, { maxLength: 3 }),
  policies: fc.array(policyArb, { maxLength: 4 }),
});
