import type { IpFamily } from '@kube-router/netpol';
import type { FamilyState } from './kernel-state.js';
import { isOwnChain, isOwnSet, staleChainRank } from './names.js';
import type { NodeRender } from './render-node.js';
import type { PolicyFamilyRender, PolicyRender } from './render-policy.js';

// What nothing refers to any more, found without walking every policy on an event's sync.

/** What one sweep saw wanted: the policies' renders by id, and the node's own chains and sets per family. */
export interface WantedObjects {
  readonly policies: ReadonlyMap<string, PolicyRender>;
  readonly node: ReadonlyMap<IpFamily, { readonly chains: ReadonlySet<string>; readonly sets: ReadonlySet<string> }>;
}

export function wantedObjects(
  policies: readonly PolicyRender[],
  nodes: ReadonlyMap<IpFamily, NodeRender>,
  families: readonly IpFamily[],
): WantedObjects {
  const byId = new Map(policies.map((policy) => [policy.id, policy] as const));
  const node = new Map<IpFamily, { chains: Set<string>; sets: Set<string> }>();
  for (const family of families) {
    const rendered = nodes.get(family);
    node.set(family, {
      chains: new Set([...(rendered?.sharedChains ?? []), ...(rendered?.podChains ?? []), ...(rendered?.baseChains ?? [])].map((c) => c.name)),
      sets: new Set((rendered?.sets ?? []).map((set) => set.name)),
    });
  }
  return { policies: byId, node };
}

export interface StaleObject {
  readonly family: IpFamily;
  readonly kind: 'chain' | 'set' | 'map';
  readonly name: string;
}

/**
 * Our objects in the kernel that `wanted` no longer names, in an order the kernel can delete them in one
 * transaction: pod chains first (they jump to policy chains), then policy chains, then sets. After a read-back
 * (`last` undefined) everything of ours in the kernel is a candidate; after that, only what the policies that changed
 * or went, and the node's own objects, no longer name: an event's sync does not walk every policy's sets.
 */
export function staleObjects(
  wanted: WantedObjects,
  policies: readonly PolicyRender[],
  families: readonly IpFamily[],
  stateOf: (family: IpFamily) => FamilyState,
  last: WantedObjects | undefined,
): StaleObject[] {
  const doomed: StaleObject[] = [];
  for (const family of families) {
    const state = stateOf(family);
    const node = wanted.node.get(family) ?? { chains: new Set<string>(), sets: new Set<string>() };
    const { chains, sets } = last ? changedCandidates(wanted, node, policies, family, state, last) : everyCandidate(node, policies, family, state);
    const staleChains = chains.filter(isOwnChain);
    staleChains.sort((a, b) => staleChainRank(a) - staleChainRank(b));
    for (const name of staleChains) doomed.push({ family, kind: 'chain', name });
    for (const name of sets) {
      if (isOwnSet(name)) doomed.push({ family, kind: state.sets.get(name)?.map ? 'map' : 'set', name });
    }
  }
  return doomed;
}

type NodeObjects = { readonly chains: ReadonlySet<string>; readonly sets: ReadonlySet<string> };

function namesIn(policies: readonly PolicyRender[], family: IpFamily, kind: 'chains' | 'sets'): Set<string> {
  return new Set(policies.flatMap((p) => (p.families[family]?.[kind] ?? []).map((object) => object.name)));
}

function everyCandidate(node: NodeObjects, policies: readonly PolicyRender[], family: IpFamily, state: FamilyState) {
  const policyChains = namesIn(policies, family, 'chains');
  const policySets = namesIn(policies, family, 'sets');
  return {
    chains: [...state.chains.keys()].filter((name) => !policyChains.has(name) && !node.chains.has(name)),
    sets: [...state.sets.keys()].filter((name) => !policySets.has(name) && !node.sets.has(name)),
  };
}

function changedCandidates(
  wanted: WantedObjects,
  node: NodeObjects,
  policies: readonly PolicyRender[],
  family: IpFamily,
  state: FamilyState,
  last: WantedObjects,
) {
  const isWanted = (name: string, policy: PolicyFamilyRender | undefined, kind: 'chains' | 'sets') =>
    node.chains.has(name) || node.sets.has(name) || (policy?.[kind].some((object) => object.name === name) ?? false);
  const chains = new Set<string>();
  const sets = new Set<string>();
  const before = last.node.get(family);
  for (const name of before?.chains ?? []) if (!node.chains.has(name)) chains.add(name);
  for (const name of before?.sets ?? []) if (!node.sets.has(name)) sets.add(name);
  for (const [id, previous] of last.policies) {
    const now = wanted.policies.get(id);
    if (now === previous) continue;
    const was = previous.families[family];
    const is = now?.families[family];
    for (const c of was?.chains ?? []) if (!isWanted(c.name, is, 'chains')) chains.add(c.name);
    for (const set of was?.sets ?? []) if (!isWanted(set.name, is, 'sets')) sets.add(set.name);
  }
  let setCandidates = [...sets].filter((name) => state.sets.has(name));
  // Sets are shared between policies: one that a policy no longer names may still be another one's.
  if (setCandidates.length > 0) {
    const inUse = namesIn(policies, family, 'sets');
    setCandidates = setCandidates.filter((name) => !inUse.has(name));
  }
  return { chains: [...chains].filter((name) => state.chains.has(name)), sets: setCandidates };
}
