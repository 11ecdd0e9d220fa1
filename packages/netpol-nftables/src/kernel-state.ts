import { hash } from 'node:crypto';
import type { NftRuleset } from '@kube-router/netfilter';
import type { IpFamily } from '@kube-router/netpol';
import { canonicalIntervals } from './interval.js';
import { TABLES } from './names.js';
import { revisionOf } from './objects.js';
import type { ChainRender, SetRender } from './objects.js';

// What the applier knows the kernel holds of our tables: read back with `nft -j`, compared with what is rendered.

export interface KnownChain {
  /** From the `[rev ...]` tag of its first rule; undefined when the chain is not one we wrote as it is. */
  readonly digest: string | undefined;
  readonly ruleCount: number;
}

/** What one of our chains held when it was read back, under the `[rev ...]` tag it carried then. */
export interface ReadBackChain {
  readonly digest: string;
  /** A hash of its rules as nft lists them (expressions and comments). */
  readonly content: string;
}

export interface KnownSet {
  readonly type: string;
  readonly interval: boolean;
  readonly map: string | undefined;
  /** Canonical elements (map entries as `key : verdict`). */
  readonly elements: ReadonlySet<string>;
}

export interface FamilyState {
  tableExists: boolean;
  readonly chains: Map<string, KnownChain>;
  readonly sets: Map<string, KnownSet>;
}

/**
 * What the kernel holds of one family's table. A chain whose tag is the one it had at the last read-back (`before`)
 * but whose rules differ from what they were then was changed in place: it is known with no digest, so that the
 * apply writes it again. `readBack` receives what each tagged chain holds now; a chain changed in place keeps the
 * content it had until it is written (a write that fails leaves it to be found changed again; one that succeeds
 * forgets it, so that the next read-back records what was written). A chain changed before any read-back of its tag
 * (between the write and the next periodic sync, or while the agent was down) is taken as it is found: a restarted
 * agent adopts its tables by their tags and cannot tell.
 */
export function readState(
  ruleset: NftRuleset,
  family: IpFamily,
  before: ReadonlyMap<string, ReadBackChain> | undefined,
  readBack: Map<string, ReadBackChain>,
): { state: FamilyState; changedInPlace: string[] } {
  const { name: table } = TABLES[family];
  const state: FamilyState = { tableExists: ruleset.tables.some((t) => t.name === table), chains: new Map(), sets: new Map() };
  const changedInPlace: string[] = [];
  const rulesByChain = new Map<string, NftRuleset['rules'][number][]>();
  for (const rule of ruleset.rules) {
    let list = rulesByChain.get(rule.chain);
    if (!list) rulesByChain.set(rule.chain, (list = []));
    list.push(rule);
  }
  for (const listed of ruleset.chains) {
    const rules = rulesByChain.get(listed.name) ?? [];
    // An empty chain carries no tag; its content is known all the same.
    let digest = rules.length === 0 ? EMPTY_DIGEST : revisionOf(rules[0]?.comment);
    if (digest !== undefined && digest !== EMPTY_DIGEST) {
      const content = contentOf(rules);
      const earlier = before?.get(listed.name);
      if (earlier !== undefined && earlier.digest === digest && earlier.content !== content) {
        changedInPlace.push(listed.name);
        readBack.set(listed.name, earlier);
        digest = undefined;
      } else {
        readBack.set(listed.name, { digest, content });
      }
    }
    state.chains.set(listed.name, { digest, ruleCount: rules.length });
  }
  for (const set of ruleset.sets) {
    const type = Array.isArray(set.type) ? set.type.join(' . ') : String(set.type);
    const interval = set.flags.includes('interval');
    state.sets.set(set.name, {
      type,
      interval,
      map: undefined,
      elements: new Set(interval ? canonicalIntervals(set.elements, family) : set.elements),
    });
  }
  for (const map of ruleset.maps) {
    const type = Array.isArray(map.type) ? map.type.join(' . ') : String(map.type);
    state.sets.set(map.name, { type, interval: map.flags.includes('interval'), map: map.map, elements: new Set(map.entries) });
  }
  return { state, changedInPlace };
}

/**
 * A chain's rules as nft lists them, hashed: equal for the same rules read back again, whatever their handles and
 * whatever their `counter` statements counted since (traffic is not a change of the rule).
 */
export function contentOf(rules: readonly NftRuleset['rules'][number][]): string {
  return hash('sha1', JSON.stringify(rules.map((rule) => [rule.expr.map(withoutCount), rule.comment ?? ''])), 'base64');
}

function withoutCount(expression: unknown): unknown {
  return typeof expression === 'object' && expression !== null && 'counter' in expression ? COUNTER : expression;
}

const COUNTER = { counter: null };

const EMPTY_DIGEST = '';

export function sameChain(known: KnownChain | undefined, wanted: ChainRender): boolean {
  if (!known) return false;
  if (wanted.rules.length === 0) return known.ruleCount === 0;
  return known.digest === wanted.digest && known.ruleCount === wanted.rules.length;
}

export function knownSetOf(set: SetRender, family: IpFamily): KnownSet {
  return {
    type: set.type,
    interval: set.kind === 'interval',
    map: set.map,
    elements: new Set(set.kind === 'interval' ? canonicalIntervals(set.elements, family) : set.elements),
  };
}

export function sameSet(known: KnownSet | undefined, wanted: SetRender, family: IpFamily): boolean {
  if (!known || known.type !== wanted.type || known.map !== wanted.map || known.interval !== (wanted.kind === 'interval')) return false;
  const elements = wanted.kind === 'interval' ? canonicalIntervals(wanted.elements, family) : wanted.elements;
  return elements.length === known.elements.size && elements.every((element) => known.elements.has(element));
}
