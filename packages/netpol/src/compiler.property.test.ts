import { compareText } from './sort.js';
/*
 * Property tests of the compiler's two promises: an incremental compile equals a fresh one after any sequence of
 * changes, and no input, however malformed, makes a compile throw. The clusters are small but dense (few names, few
 * labels, overlapping addresses and blocks), so that random changes keep hitting the same selectors and ports.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PolicyCompiler, compileNetworkPolicies } from './compiler.js';
import type { CompileChanges, CompileInput } from './compiler.js';
import { NODE } from './testing/fixtures.js';
import { clusterArb, labels, namespaceArb, podArb, policyArb } from './testing/arbitraries.js';
import type { Cluster } from './testing/arbitraries.js';
import type { NamespaceLike, NetworkPolicyLike, PodLike } from './types.js';

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


type Kind = 'pods' | 'namespaces' | 'policies';

/** The cluster as an informer holds it: one object per key, the last one of the generated lists winning. */
function keyed(cluster: Cluster): Cluster {
  const unique = <T extends PodLike | NamespaceLike | NetworkPolicyLike>(list: readonly T[]) => [
    ...new Map(list.map((object) => [idOf(object), object])).values(),
  ];
  return { pods: unique(cluster.pods), namespaces: unique(cluster.namespaces), policies: unique(cluster.policies) };
}

/**
 * What an informer's events between two compiles hand on: per key the latest object, or the last one seen for a
 * key that is gone. A relist updates every object (ListWatch emits an update for each listed one).
 */
function changesBetween(before: Cluster, after: Cluster): CompileChanges {
  const diff = <T extends PodLike | NamespaceLike | NetworkPolicyLike>(kind: Kind) => {
    const old = new Map((before[kind] as T[]).map((object) => [idOf(object), object]));
    const now = new Map((after[kind] as T[]).map((object) => [idOf(object), object]));
    return {
      upserted: [...now].filter(([id, object]) => old.get(id) !== object).map(([, object]) => object),
      deleted: [...old].filter(([id]) => !now.has(id)).map(([, object]) => object),
    };
  };
  return { pods: diff('pods'), namespaces: diff('namespaces'), policies: diff('policies') };
}

describe('PolicyCompiler properties', () => {
  it('a compile from the changed objects alone equals a fresh compile of the full lists, between full compiles', () => {
    fc.assert(
      fc.property(
        clusterArb,
        fc.array(fc.tuple(fc.array(changeArb, { minLength: 1, maxLength: 4 }), fc.boolean()), { minLength: 1, maxLength: 20 }),
        (initial, batches) => {
          const compiler = new PolicyCompiler({ nodeName: NODE });
          let cluster = keyed(initial);
          compiler.compile(cluster);
          for (const [changes, full] of batches) {
            const previous = cluster;
            for (const change of changes) cluster = keyed(apply(cluster, change));
            // A periodic full sync now and then, as the controller runs them between event syncs.
            const model = full ? compiler.compile(cluster) : compiler.compileChanges(changesBetween(previous, cluster));
            expect(model).toEqual(compileNetworkPolicies({ nodeName: NODE, ...cluster }));
          }
        },
      ),
      { numRuns: 400 },
    );
  });


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
