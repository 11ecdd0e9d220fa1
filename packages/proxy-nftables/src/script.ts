import type { NftRuleset } from '@kube-router/netfilter';
import { COUNTER_MAPS, COUNTER_PREFIX, MAPS, NODEPORT_IPS_SET, PREFIX, isServiceObjectName } from './names.js';
import type { MapName } from './names.js';
import { FIXED_CHAINS } from './render.js';
import type { Fragment, TableState } from './render.js';

/** `ip kube-router-proxy`: how scripts name the table. */
export type TableRef = string;

/** Elements per `add element` line: long lines are fine for nft, but a bounded line keeps a refused one readable. */
const ELEMENTS_PER_LINE = 500;
const ALL_MAPS: readonly MapName[] = Object.values(MAPS);

function withTable(table: TableRef, line: string): string {
  return line.replace(/^((?:add|flush|delete) (?:table|chain|rule|set|map|element)) T(?= |$)/, `$1 ${table}`);
}

function elementLines(table: TableRef, verb: 'add' | 'delete', object: string, elements: readonly string[]): string[] {
  const lines: string[] = [];
  for (let start = 0; start < elements.length; start += ELEMENTS_PER_LINE) {
    lines.push(`${verb} element ${table} ${object} { ${elements.slice(start, start + ELEMENTS_PER_LINE).join(', ')} }`);
  }
  return lines;
}

/** `key : value` of a map element: a counter's name is quoted (it holds slashes), a verdict is not. */
function elementText(map: MapName, key: string, value: string): string {
  return COUNTER_MAPS.has(map) ? `${key} : "${value}"` : `${key} : ${value}`;
}

/** One of the plugin's named counters (the others in the table, if any, are not its own to delete). */
export function isServiceCounterName(name: string): boolean {
  return isServiceObjectName(name) && Object.values(COUNTER_PREFIX).some((prefix) => name.startsWith(prefix));
}

function chainLines(table: TableRef, chain: string, rules: readonly string[]): string[] {
  return [`flush chain ${table} ${chain}`, ...rules.map((rule) => `add rule ${table} ${chain} ${rule}`)];
}

function affinitySetLine(table: TableRef, family: 'ip' | 'ip6', name: string, seconds: number): string {
  const type = family === 'ip' ? 'ipv4_addr' : 'ipv6_addr';
  // `dynamic` as kube-proxy: some kernels add it themselves once a rule updates the set, and a later identical `add`
  // without it would then be refused as a change of flags.
  return `add set ${table} ${name} { type ${type} ; flags dynamic,timeout ; timeout ${seconds}s ; }`;
}

function familyOf(table: TableRef): 'ip' | 'ip6' {
  return table.startsWith('ip6 ') ? 'ip6' : 'ip';
}

export interface Listed {
  readonly chains: ReadonlySet<string>;
  readonly sets: ReadonlySet<string>;
  /** Named counters; absent: none are known (none is deleted). */
  readonly counters?: ReadonlySet<string>;
}

/**
 * Writes the whole table as `desired` says, whatever is there: the fixed part, every Service chain flushed and
 * refilled, every map flushed and refilled, in one transaction (nothing is ever missing in between). Service chains
 * the listing shows but `desired` lacks are flushed (deleted later: `stale`); affinity sets it lacks are deleted.
 */
export function fullScript(table: TableRef, desired: TableState, listed: Listed): { script: string; staleChains: string[] } {
  const lines = desired.base.map((line) => withTable(table, line));
  lines.push(`flush set ${table} ${NODEPORT_IPS_SET}`, ...elementLines(table, 'add', NODEPORT_IPS_SET, [...desired.nodePortIps]));
  for (const [name, seconds] of desired.affinitySets) lines.push(affinitySetLine(table, familyOf(table), name, seconds));
  // `add` of a counter that exists keeps its count: a restart or a periodic sync does not reset the series.
  for (const name of desired.counters.keys()) lines.push(`add counter ${table} ${name}`);
  for (const chain of desired.chains.keys()) lines.push(`add chain ${table} ${chain}`);
  for (const [chain, rules] of desired.chains) lines.push(...chainLines(table, chain, rules));
  for (const map of ALL_MAPS) {
    lines.push(`flush map ${table} ${map}`);
    lines.push(...elementLines(table, 'add', map, [...desired.maps[map]].map(([key, verdict]) => elementText(map, key, verdict))));
  }
  const staleChains = [...listed.chains].filter((chain) => isServiceObjectName(chain) && !desired.chains.has(chain)).sort();
  for (const chain of staleChains) lines.push(`flush chain ${table} ${chain}`);
  for (const set of [...listed.sets].filter((set) => set.startsWith(PREFIX.affinity) && !desired.affinitySets.has(set)).sort()) {
    lines.push(`delete set ${table} ${set}`);
  }
  // After the maps were flushed: a counter no element refers to any more can go in the same transaction.
  for (const counter of [...(listed.counters ?? [])].filter((name) => isServiceCounterName(name) && !desired.counters.has(name)).sort()) {
    lines.push(`delete counter ${table} ${counter}`);
  }
  return { script: `${lines.join('\n')}\n`, staleChains };
}

export interface DiffResult {
  readonly script: string;
  /** Statements other than the fixed part's: what the event changed. */
  readonly operations: number;
  /** Chains flushed because no Service needs them: delete them a little later. */
  readonly staleChains: readonly string[];
  /** Chains (re)created: no longer stale if they were. */
  readonly addedChains: readonly string[];
}

const EMPTY_FRAGMENT: Fragment = { chains: new Map(), elements: [], affinitySets: new Map(), counters: new Map() };

/**
 * Only what changed between what was written and what is wanted: one transaction, no listing. Services whose fragment
 * is the same object as last time are not looked into, so the cost follows the change, not the cluster.
 */
export function diffScript(table: TableRef, written: TableState, desired: TableState): DiffResult {
  const lines: string[] = [];
  if (written.base.join('\n') !== desired.base.join('\n')) lines.push(...desired.base.map((line) => withTable(table, line)));
  const baseLines = lines.length;
  const goneIps = [...written.nodePortIps].filter((address) => !desired.nodePortIps.has(address));
  const newIps = [...desired.nodePortIps].filter((address) => !written.nodePortIps.has(address));
  lines.push(...elementLines(table, 'delete', NODEPORT_IPS_SET, goneIps), ...elementLines(table, 'add', NODEPORT_IPS_SET, newIps));

  const addSets: string[] = [];
  const addChains: string[] = [];
  const chainRules: string[] = [];
  const deletes = new Map<MapName, string[]>(ALL_MAPS.map((map) => [map, []]));
  const adds = new Map<MapName, string[]>(ALL_MAPS.map((map) => [map, []]));
  const staleChains: string[] = [];
  const deleteSets: string[] = [];
  const addCounters: string[] = [];
  const deleteCounters: string[] = [];
  const compare = (before: Fragment, after: Fragment) => {
    for (const name of after.counters.keys()) if (!before.counters.has(name)) addCounters.push(`add counter ${table} ${name}`);
    for (const name of before.counters.keys()) if (!after.counters.has(name)) deleteCounters.push(`delete counter ${table} ${name}`);
    for (const [name, seconds] of after.affinitySets) if (!before.affinitySets.has(name)) addSets.push(affinitySetLine(table, familyOf(table), name, seconds));
    for (const name of before.affinitySets.keys()) if (!after.affinitySets.has(name)) deleteSets.push(`delete set ${table} ${name}`);
    for (const [chain, rules] of after.chains) {
      const was = before.chains.get(chain);
      if (!was) addChains.push(chain);
      if (!was || !sameRules(was, rules)) chainRules.push(...chainLines(table, chain, rules));
    }
    for (const chain of before.chains.keys()) if (!after.chains.has(chain)) staleChains.push(chain);
    const beforeElements = new Map(before.elements.map(([map, key, verdict]) => [`${map}|${key}`, verdict]));
    const afterElements = new Map(after.elements.map(([map, key, verdict]) => [`${map}|${key}`, verdict]));
    for (const [map, key, verdict] of before.elements) if (afterElements.get(`${map}|${key}`) !== verdict) deletes.get(map)?.push(key);
    for (const [map, key, verdict] of after.elements) if (beforeElements.get(`${map}|${key}`) !== verdict) adds.get(map)?.push(elementText(map, key, verdict));
  };
  for (const [owner, fragment] of desired.fragments) {
    const before = written.fragments.get(owner);
    if (before !== fragment) compare(before ?? EMPTY_FRAGMENT, fragment);
  }
  for (const [owner, fragment] of written.fragments) if (!desired.fragments.has(owner)) compare(fragment, EMPTY_FRAGMENT);

  lines.push(...addSets, ...addCounters, ...addChains.map((chain) => `add chain ${table} ${chain}`), ...chainRules);
  // Deletes first: an address:port that passes from one Service to another is deleted and added in this transaction.
  for (const [map, keys] of deletes) lines.push(...elementLines(table, 'delete', map, keys));
  for (const [map, elements] of adds) lines.push(...elementLines(table, 'add', map, elements));
  // A counter goes after the elements that named it (the kernel refuses to delete one in use).
  lines.push(...staleChains.map((chain) => `flush chain ${table} ${chain}`), ...deleteSets, ...deleteCounters);
  return { script: lines.length > 0 ? `${lines.join('\n')}\n` : '', operations: lines.length - baseLines, staleChains, addedChains: addChains };
}

function sameRules(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((rule, index) => rule === b[index]);
}

/** What the kernel's table shows that differs from what was written: by kind, the names of what differs. */
export interface Drift {
  readonly chain: string[];
  readonly map_element: string[];
  readonly set: string[];
}

/**
 * Compares a listing of the table (`nft -j list table`) with what was written. Chains are compared by presence and
 * rule count, maps element by element (counter maps too: which counter an address has, never its count), the NodePort address set by its elements, affinity sets by presence: what
 * someone else changed, removed or added. (A rule rewritten in place is not seen here, but the full write that follows
 * replaces it all the same.)
 */
export function driftOf(listing: NftRuleset, written: TableState, stale: ReadonlySet<string>): Drift {
  const drift: Drift = { chain: [], map_element: [], set: [] };
  const ruleCounts = new Map<string, number>();
  for (const rule of listing.rules) ruleCounts.set(rule.chain, (ruleCounts.get(rule.chain) ?? 0) + 1);
  const listedChains = new Set(listing.chains.map((chain) => chain.name));
  const expectChain = (chain: string, rules: number) => {
    if (!listedChains.has(chain) || (ruleCounts.get(chain) ?? 0) !== rules) drift.chain.push(chain);
  };
  for (const [chain, rules] of written.baseRuleCounts) expectChain(chain, rules);
  for (const chain of FIXED_CHAINS) if (!written.baseRuleCounts.has(chain)) expectChain(chain, 0);
  for (const [chain, rules] of written.chains) expectChain(chain, rules.length);
  for (const chain of listedChains) {
    if (isServiceObjectName(chain) && !written.chains.has(chain) && !stale.has(chain)) drift.chain.push(chain);
  }
  const listedMaps = new Map(listing.maps.map((map) => [map.name, map]));
  for (const map of ALL_MAPS) {
    const listed = listedMaps.get(map);
    const entries = new Map((listed?.entries ?? []).map((entry) => splitEntry(entry)));
    for (const [key, verdict] of written.maps[map]) if (entries.get(key) !== verdict) drift.map_element.push(`${map}: ${key}`);
    for (const key of entries.keys()) if (!written.maps[map].has(key)) drift.map_element.push(`${map}: ${key}`);
  }
  const listedSets = new Map(listing.sets.map((set) => [set.name, set]));
  const nodePortIps = listedSets.get(NODEPORT_IPS_SET);
  if (!nodePortIps) drift.set.push(NODEPORT_IPS_SET);
  else {
    const elements = new Set(nodePortIps.elements);
    if (elements.size !== written.nodePortIps.size || [...written.nodePortIps].some((address) => !elements.has(address))) drift.set.push(NODEPORT_IPS_SET);
  }
  for (const set of written.affinitySets.keys()) if (!listedSets.has(set)) drift.set.push(set);
  for (const set of listedSets.keys()) if (set.startsWith(PREFIX.affinity) && !written.affinitySets.has(set)) drift.set.push(set);
  return drift;
}

function splitEntry(entry: string): [string, string] {
  const at = entry.lastIndexOf(' : ');
  return at < 0 ? [entry, ''] : [entry.slice(0, at), entry.slice(at + 3)];
}
