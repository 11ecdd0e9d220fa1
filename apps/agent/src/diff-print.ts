import { parseIpsetSave, parseIptablesSave } from '@kube-router/netfilter';
import type { IpFamily } from '@kube-router/netfilter';

/** What `kube-router diff` reads of one kernel (the node's copy before the sync, and after it): saved text per tool. */
export interface KernelSnapshot {
  /** `iptables-save -t filter` / `ip6tables-save -t filter`, per family. */
  readonly iptables: Readonly<Partial<Record<IpFamily, string>>>;
  /** `ipset save`. */
  readonly ipset: string;
  /** `nft list table <family> <name>`, keyed `<family> <name>`; absent tables are left out. */
  readonly nft: Readonly<Record<string, string>>;
}

/** One chain, set or map, as the diff compares it. */
export interface KernelObject {
  readonly kind: 'chain' | 'set' | 'map';
  /** Where it lives: `iptables ipv4 filter`, `ipset inet`, `nft ip kube-router-filter-ipv4`. */
  readonly where: string;
  readonly name: string;
  /** What defines it besides its content: a chain's policy or hook, a set's type and flags. */
  readonly header: readonly string[];
  /** A chain's rules, in order. */
  readonly rules: readonly string[];
  /** A set's or map's elements, sorted. */
  readonly members: readonly string[];
}

export interface ObjectChange {
  readonly change: 'created' | 'removed' | 'changed';
  readonly before: KernelObject | undefined;
  readonly after: KernelObject | undefined;
}

const IPSET_VOLATILE_OPTIONS = new Set(['initval']);

/** Every chain, ipset, nft set and map of a snapshot, by `<where> <kind> <name>`. */
export function kernelObjects(snapshot: KernelSnapshot): Map<string, KernelObject> {
  const objects = new Map<string, KernelObject>();
  const add = (object: KernelObject) => objects.set(`${object.where}\u0000${object.kind}\u0000${object.name}`, object);
  for (const [family, text] of Object.entries(snapshot.iptables) as Array<[IpFamily, string]>) {
    for (const table of parseIptablesSave(text)) {
      for (const chain of table.chains) {
        add({
          kind: 'chain',
          where: `iptables ${family} ${table.name}`,
          name: chain.name,
          header: chain.builtin ? [`policy ${chain.policy ?? '-'}`] : [],
          rules: chain.rules.map((rule) => `-A ${rule.chain} ${rule.spec}`.trimEnd()),
          members: [],
        });
      }
    }
  }
  for (const set of parseIpsetSave(snapshot.ipset)) {
    // initval seeds the hash: a set created again with the same members holds the same thing.
    const options = Object.entries(set.options)
      .filter(([key]) => !IPSET_VOLATILE_OPTIONS.has(key))
      .map(([key, value]) => (value === true ? key : `${key} ${value}`));
    add({ kind: 'set', where: 'ipset', name: set.name, header: [[set.type, ...options].join(' ')], rules: [], members: [...set.members].sort() });
  }
  for (const [table, text] of Object.entries(snapshot.nft)) for (const object of parseNftTable(table, text)) add(object);
  return objects;
}

/**
 * Parses `nft list table` output (nft's own text, not JSON, so that the diff shows rules as operators read them):
 * chains with their hook line and rules, sets and maps with their declaration and elements.
 */
export function parseNftTable(table: string, text: string): KernelObject[] {
  const objects: KernelObject[] = [];
  const lines = text.split('\n').map((line) => line.trim());
  let current: { kind: 'chain' | 'set' | 'map'; name: string; header: string[]; rules: string[]; members: string[] } | undefined;
  let elements: string | undefined;
  for (const line of lines) {
    if (line === '' || line.startsWith('#')) continue;
    if (elements !== undefined) {
      elements += ` ${line}`;
      if (braceDepth(elements) === 0) {
        current?.members.push(...splitElements(elements));
        elements = undefined;
      }
      continue;
    }
    const opened = /^(chain|set|map) (\S+) \{$/.exec(line);
    if (!current && opened) {
      current = { kind: opened[1] as 'chain' | 'set' | 'map', name: opened[2] as string, header: [], rules: [], members: [] };
      continue;
    }
    if (!current) continue;
    if (line === '}') {
      objects.push({ ...current, where: `nft ${table}`, members: current.members.sort() });
      current = undefined;
    } else if (current.kind !== 'chain' && line.startsWith('elements = {')) {
      elements = line.slice('elements ='.length).trim();
      if (braceDepth(elements) === 0) {
        current.members.push(...splitElements(elements));
        elements = undefined;
      }
    } else if (current.kind === 'chain' && !/^(type |policy |comment )/.test(line)) {
      // A rule written again starts counting from zero: its counters say nothing about what it does.
      current.rules.push(line.replace(/counter packets \d+ bytes \d+/g, 'counter'));
    } else {
      current.header.push(line);
    }
  }
  return objects;
}

function braceDepth(text: string): number {
  let depth = 0;
  for (const char of text) depth += char === '{' ? 1 : char === '}' ? -1 : 0;
  return depth;
}

/** `{ a, b : c, { x, y } }` → `a`, `b : c`, `{ x, y }`: commas inside inner braces stay. */
function splitElements(text: string): string[] {
  const inner = text
    .trim()
    .replace(/^\{/, '')
    .replace(/\}$/, '')
    .replace(/counter packets \d+ bytes \d+/g, 'counter');
  const parts: string[] = [];
  let depth = 0;
  let part = '';
  for (const char of inner) {
    if (char === ',' && depth === 0) {
      parts.push(part.trim());
      part = '';
      continue;
    }
    depth += char === '{' ? 1 : char === '}' ? -1 : 0;
    part += char;
  }
  if (part.trim() !== '') parts.push(part.trim());
  return parts.filter((p) => p !== '');
}

const sameList = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((item, i) => item === b[i]);

/** What differs between two snapshots, object by object, sorted by where, kind and name. */
export function diffSnapshots(before: KernelSnapshot, after: KernelSnapshot): ObjectChange[] {
  const was = kernelObjects(before);
  const now = kernelObjects(after);
  const keys = [...new Set([...was.keys(), ...now.keys()])].sort();
  const changes: ObjectChange[] = [];
  for (const key of keys) {
    const b = was.get(key);
    const a = now.get(key);
    if (!b) changes.push({ change: 'created', before: undefined, after: a });
    else if (!a) changes.push({ change: 'removed', before: b, after: undefined });
    else if (!sameList(b.header, a.header) || !sameList(b.rules, a.rules) || !sameList(b.members, a.members)) {
      changes.push({ change: 'changed', before: b, after: a });
    }
  }
  return changes;
}

/** What is in `a` and not in `b`, counting repeats (a chain may hold one rule twice), in `a`'s order. */
function minus(a: readonly string[], b: readonly string[]): string[] {
  const left = new Map<string, number>();
  for (const item of b) left.set(item, (left.get(item) ?? 0) + 1);
  return a.filter((item) => {
    const count = left.get(item) ?? 0;
    if (count === 0) return true;
    left.set(item, count - 1);
    return false;
  });
}

const SIGN = { created: '+', removed: '-', changed: '~' } as const;

/**
 * The changes as an operator reads them: one line per object (`+` created, `-` removed, `~` changed) naming its kind,
 * name and where it lives, then its rules and elements that go (`-`) and come (`+`). A chain whose rules stay but
 * move says so. Empty when nothing changes.
 */
export function formatChanges(changes: readonly ObjectChange[]): string {
  const out: string[] = [];
  for (const { change, before, after } of changes) {
    const object = (after ?? before) as KernelObject;
    out.push(`${SIGN[change]} ${object.kind} ${object.name} (${object.where})`);
    const b = before ?? { header: [], rules: [], members: [] };
    const a = after ?? { header: [], rules: [], members: [] };
    for (const line of minus(b.header, a.header)) out.push(`  - ${line}`);
    for (const line of minus(a.header, b.header)) out.push(`  + ${line}`);
    const rulesGone = minus(b.rules, a.rules);
    const rulesCome = minus(a.rules, b.rules);
    for (const line of rulesGone) out.push(`  - ${line}`);
    for (const line of rulesCome) out.push(`  + ${line}`);
    if (rulesGone.length === 0 && rulesCome.length === 0 && !sameList(b.rules, a.rules)) out.push('  ~ same rules in a new order');
    for (const line of minus(b.members, a.members)) out.push(`  - ${line}`);
    for (const line of minus(a.members, b.members)) out.push(`  + ${line}`);
  }
  return out.length === 0 ? '' : `${out.join('\n')}\n`;
}
