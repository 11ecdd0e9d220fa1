import { readOrThrow, runInNetns, runWriterLoop, seededRandom } from './foreign-writer.js';
import type { ForeignWriter, ToolOutcome, WriterLoop } from './foreign-writer.js';

/*
 * Another nftables user beside netpol-nftables: a table of its own (`inet istio-cni`) and an `ip filter` table (the
 * name iptables-nft and firewalls use), each changed by `nft -f` transactions that add, flush and delete its chains,
 * sets and elements, and now and then the whole `ip filter` table deleted and written again.
 */

/** The agent's tables: netpol-nftables' `kube-router-filter-ipv4` and `-ipv6`. */
const AGENT_TABLE = /^kube-router-/;

interface ChainRecord {
  /** The base chain's declaration, or undefined for a regular chain. */
  readonly base?: string;
  /** Its rules by the id each carries as its comment, in order. */
  rules: { readonly id: string; readonly text: string }[];
}

interface TableRecord {
  chains: Map<string, ChainRecord>;
  sets: Map<string, Set<string>>;
}

interface SetSpec {
  readonly type: string;
  readonly pool: readonly string[];
}

interface TableSpec {
  /** `inet istio-cni`. */
  readonly ref: string;
  /** Its base chain, which jumps to `main`. */
  readonly base: { readonly name: string; readonly declaration: string };
  readonly sets: Readonly<Record<string, SetSpec>>;
  /** Rule texts `main` may hold, without comments. */
  readonly rules: readonly string[];
}

const range = <T>(count: number, make: (n: number) => T): T[] => Array.from({ length: count }, (_, n) => make(n));

const TABLES: readonly TableSpec[] = [
  {
    ref: 'inet istio-cni',
    base: { name: 'forward', declaration: 'type filter hook forward priority filter + 10; policy accept;' },
    sets: {
      probes4: { type: 'ipv4_addr', pool: range(40, (n) => `192.0.2.${n + 1}`) },
      probes6: { type: 'ipv6_addr', pool: range(40, (n) => `2001:db8::${(n + 1).toString(16)}`) },
    },
    rules: [
      'ip saddr @probes4 tcp dport 15008 accept',
      'ip6 saddr @probes6 tcp dport 15008 accept',
      ...range(12, (n) => `ip saddr 192.0.2.${n + 100} tcp dport 15006 drop`),
    ],
  },
  {
    ref: 'ip filter',
    base: { name: 'FORWARD', declaration: 'type filter hook forward priority filter; policy accept;' },
    sets: { blocked: { type: 'ipv4_addr', pool: range(40, (n) => `198.51.100.${n + 1}`) } },
    rules: ['ip saddr @blocked tcp dport 9 drop', ...range(12, (n) => `ip daddr 198.51.100.${n + 100} udp dport 53 drop`)],
  },
];

export const nftWriter: ForeignWriter = {
  name: 'nft',
  tools: ['nft'],

  async start(netns, seed, onWrite) {
    const random = seededRandom(seed);
    const tables = new Map<string, TableRecord>();
    let nextId = 0;
    const newRules = (spec: TableSpec) => spec.rules.filter(() => random.chance(4 / spec.rules.length)).map((text) => ({ id: `r${nextId++}`, text }));
    const ruleLine = (ref: string, chain: string, rule: { id: string; text: string }) => `add rule ${ref} ${chain} ${rule.text} comment "${rule.id}"`;
    const apply = (lines: readonly string[]) => runInNetns(netns, 'nft', ['-f', '-'], `${lines.join('\n')}\n`);
    const someOf = (pool: readonly string[], most: number) => pool.filter(() => random.chance(most / pool.length));

    /** The whole table as a fresh start writes it: sets with a few elements, `main` and the base chain jumping to it. */
    const wholeTable = (spec: TableSpec): { lines: string[]; record: TableRecord } => {
      const record: TableRecord = { chains: new Map(), sets: new Map() };
      const lines = [`add table ${spec.ref}`];
      for (const [name, set] of Object.entries(spec.sets)) {
        const elements = someOf(set.pool, 4);
        lines.push(`add set ${spec.ref} ${name} { type ${set.type}; }`);
        if (elements.length > 0) lines.push(`add element ${spec.ref} ${name} { ${elements.join(', ')} }`);
        record.sets.set(name, new Set(elements));
      }
      const main = newRules(spec);
      lines.push(`add chain ${spec.ref} main`, ...main.map((rule) => ruleLine(spec.ref, 'main', rule)));
      record.chains.set('main', { rules: main });
      const jump = { id: `r${nextId++}`, text: 'jump main' };
      lines.push(`add chain ${spec.ref} ${spec.base.name} { ${spec.base.declaration} }`, ruleLine(spec.ref, spec.base.name, jump));
      record.chains.set(spec.base.name, { base: spec.base.declaration, rules: [jump] });
      return { lines, record };
    };

    type Write = (spec: TableSpec, table: TableRecord, record: (outcome: ToolOutcome) => boolean) => Promise<void>;
    const writes: Write[] = [
      // Elements added and deleted in one transaction.
      async (spec, table, record) => {
        const [name, set] = random.pick(Object.entries(spec.sets));
        const held = table.sets.get(name) as Set<string>;
        const added = someOf(set.pool.filter((element) => !held.has(element)), 2);
        const deleted = [...held].filter(() => random.chance(0.3));
        const lines = [
          ...(added.length > 0 ? [`add element ${spec.ref} ${name} { ${added.join(', ')} }`] : []),
          ...(deleted.length > 0 ? [`delete element ${spec.ref} ${name} { ${deleted.join(', ')} }`] : []),
        ];
        if (lines.length === 0) return;
        if (!record(await apply(lines))) return;
        for (const element of added) held.add(element);
        for (const element of deleted) held.delete(element);
      },
      // A set flushed and refilled.
      async (spec, table, record) => {
        const [name, set] = random.pick(Object.entries(spec.sets));
        const elements = someOf(set.pool, 6);
        const lines = [`flush set ${spec.ref} ${name}`, ...(elements.length > 0 ? [`add element ${spec.ref} ${name} { ${elements.join(', ')} }`] : [])];
        if (record(await apply(lines))) table.sets.set(name, new Set(elements));
      },
      // `main` flushed and written again.
      async (spec, table, record) => {
        const rules = newRules(spec);
        if (record(await apply([`flush chain ${spec.ref} main`, ...rules.map((rule) => ruleLine(spec.ref, 'main', rule))]))) {
          table.chains.set('main', { rules });
        }
      },
      // A chain nothing jumps to, deleted or added with rules.
      async (spec, table, record) => {
        if (table.chains.has('scratch')) {
          if (record(await apply([`delete chain ${spec.ref} scratch`]))) table.chains.delete('scratch');
          return;
        }
        const rules = newRules(spec);
        if (record(await apply([`add chain ${spec.ref} scratch`, ...rules.map((rule) => ruleLine(spec.ref, 'scratch', rule))]))) {
          table.chains.set('scratch', { rules });
        }
      },
      // The whole table deleted and written again in one transaction, as a restarted firewall does.
      async (spec, _table, record) => {
        const { lines, record: fresh } = wholeTable(spec);
        if (record(await apply([`delete table ${spec.ref}`, ...lines]))) tables.set(spec.ref, fresh);
      },
    ];

    const loop: WriterLoop = {
      async write(record, verify) {
        const spec = random.pick(TABLES);
        // The table read back first: what happened to it since its last write shows before this one covers it up.
        await verify(spec.ref);
        // The table written again is the rarest write; elements change most often, as pods come and go.
        const write = random.chance(0.06) ? (writes[4] as Write) : random.pick([writes[0], ...writes.slice(0, 4)] as Write[]);
        await write(spec, tables.get(spec.ref) as TableRecord, record);
      },
      readBack: (scope) => readBack(netns, scope),
      expected() {
        const expected = new Map<string, string>();
        for (const [ref, table] of tables) for (const [key, text] of tableTexts(ref, table)) expected.set(key, text);
        return expected;
      },
      adopt(actual) {
        tables.clear();
        for (const spec of TABLES) tables.set(spec.ref, { chains: new Map(), sets: new Map() });
        for (const [key, text] of actual) {
          const [family = '', name = '', kind = '', object = ''] = key.split(' ');
          const table = tables.get(`${family} ${name}`);
          if (!table) continue;
          if (kind === 'set') table.sets.set(object, new Set(text === '' ? [] : text.split(' ')));
          if (kind === 'chain') {
            const [declaration = '', rules = ''] = text.split(' :: ');
            const base = declaration === '' ? {} : { base: declaration };
            table.chains.set(object, { ...base, rules: rules === '' ? [] : rules.split(' | ').map((id) => ({ id, text: '' })) });
          }
        }
      },
    };

    for (const spec of TABLES) {
      const { lines, record } = wholeTable(spec);
      const outcome = await apply(lines);
      if (!outcome.ok) throw new Error(`the foreign writer could not set up: ${outcome.failure}`);
      tables.set(spec.ref, record);
    }
    return runWriterLoop(loop, onWrite);
  },

  async agentState(netns) {
    const listed = JSON.parse(await readOrThrow(netns, 'nft', ['-j', 'list', 'tables'])) as { nftables: Record<string, { family: string; name: string }>[] };
    const agentTables = listed.nftables
      .flatMap((entry) => (entry.table ? [entry.table] : []))
      .filter((table) => AGENT_TABLE.test(table.name))
      .sort((a, b) => `${a.family} ${a.name}`.localeCompare(`${b.family} ${b.name}`));
    const parts: string[] = [];
    // Stateless (-s): the rules' counters count the test's own traffic, which is no change of what was written.
    for (const table of agentTables) parts.push(...normalizedTable(await readOrThrow(netns, 'nft', ['-s', '-j', 'list', 'table', table.family, table.name])));
    return parts.join('\n');
  },
};

/** A table's record as `key → text`: each chain (its declaration and its rules' ids in order) and each set's elements. */
function tableTexts(ref: string, table: TableRecord): Map<string, string> {
  const texts = new Map<string, string>();
  for (const [name, chain] of table.chains) texts.set(`${ref} chain ${name}`, `${chain.base ?? ''} :: ${chain.rules.map((rule) => rule.id).join(' | ')}`);
  for (const [name, elements] of table.sets) texts.set(`${ref} set ${name}`, [...elements].sort().join(' '));
  return texts;
}

/**
 * Its two tables as the kernel holds them, keyed as `expected()` keys them (a table that is gone has no keys); with a
 * scope (`inet istio-cni`), that table only.
 */
async function readBack(netns: string | undefined, scope?: string): Promise<Map<string, string>> {
  const actual = new Map<string, string>();
  const listed = JSON.parse(await readOrThrow(netns, 'nft', ['-j', 'list', 'tables'])) as { nftables: Record<string, { family: string; name: string }>[] };
  const present = new Set(listed.nftables.flatMap((entry) => (entry.table ? [`${entry.table.family} ${entry.table.name}`] : [])));
  for (const spec of TABLES) {
    if (!present.has(spec.ref) || (scope !== undefined && scope !== spec.ref)) continue;
    const objects = (JSON.parse(await readOrThrow(netns, 'nft', ['-j', 'list', 'table', ...spec.ref.split(' ')])) as { nftables: Record<string, unknown>[] }).nftables;
    const table: TableRecord = { chains: new Map(), sets: new Map() };
    for (const entry of objects) {
      if (entry.chain) {
        const chain = entry.chain as { name: string; hook?: string };
        // A base chain stands for the declaration the writer gave it; one it never declared shows as such.
        const base = chain.hook === undefined ? {} : { base: chain.name === spec.base.name ? spec.base.declaration : `(a base chain it never declared, hook ${chain.hook})` };
        table.chains.set(chain.name, { ...base, rules: [] });
      } else if (entry.rule) {
        const rule = entry.rule as { chain: string; comment?: string };
        table.chains.get(rule.chain)?.rules.push({ id: rule.comment ?? '(a rule without its comment)', text: '' });
      } else if (entry.set) {
        const set = entry.set as { name: string; elem?: unknown[] };
        table.sets.set(set.name, new Set((set.elem ?? []).map((element) => (typeof element === 'string' ? element : JSON.stringify(element)))));
      }
    }
    for (const [key, text] of tableTexts(spec.ref, table)) actual.set(key, text);
  }
  return actual;
}

/**
 * One of the agent's tables from `nft -j list table`, as lines equal whenever the content is: no handles, set elements
 * sorted, each rule under its chain and its position there, the lines sorted.
 */
function normalizedTable(listing: string): string[] {
  const objects = (JSON.parse(listing) as { nftables: Record<string, unknown>[] }).nftables;
  const positions = new Map<string, number>();
  const lines: string[] = [];
  for (const entry of objects) {
    const [kind, body] = Object.entries(entry)[0] ?? [];
    if (kind === undefined || kind === 'metainfo') continue;
    const value = withoutHandles(body) as Record<string, unknown>;
    if ((kind === 'set' || kind === 'map') && Array.isArray(value.elem)) value.elem = [...value.elem].map((element) => JSON.stringify(element)).sort();
    if (kind === 'rule') {
      const chain = String(value.chain);
      const position = positions.get(chain) ?? 0;
      positions.set(chain, position + 1);
      lines.push(`rule ${chain}#${position} ${JSON.stringify(value)}`);
    } else {
      lines.push(`${kind} ${JSON.stringify(value)}`);
    }
  }
  return lines.sort();
}

function withoutHandles(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutHandles);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).filter(([key]) => key !== 'handle').map(([key, inner]) => [key, withoutHandles(inner)]));
}
