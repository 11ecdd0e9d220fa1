import { readOrThrow, runInNetns, runWriterLoop, seededRandom } from './foreign-writer.js';
import type { ForeignWriter, ToolOutcome, WriterLoop } from './foreign-writer.js';

/*
 * An Istio-like tool beside netpol-iptables: ipsets of its own (istio-cni's `istio-inpod-probes-*`, which lost pod
 * addresses to kube-router's restores in kube-router #1918: it saved every set and restored them all, the other
 * tool's with what they held when it read them) filled, emptied, swapped and destroyed, and chains of its own in the
 * filter and nat tables rewritten with `iptables-restore --noflush`, as Istio's iptables do.
 */

/** The agent's names in iptables-save and ipset output (netpol-iptables, kube-router's). */
const AGENT = /KUBE-(ROUTER|POD-FW|NWPLCY)|KUBE-(SRC|DST)-|KUBE-TMP-NETPOL|kube-router-/;
const PREFIX = 'istio-';
const CHAIN_PREFIX = 'ISTIO-';

interface SetRecord {
  /** Type and family, as `ipset save` names them: `hash:ip family inet`. */
  readonly header: string;
  members: Set<string>;
}

/** The sets, each with the addresses it may hold. The probe sets are matched on by its rules; scratch is not. */
const SETS = {
  'istio-inpod-probes-v4': { header: 'hash:ip family inet', pool: range(40, (n) => `192.0.2.${n + 1}`) },
  'istio-inpod-probes-v6': { header: 'hash:ip family inet6', pool: range(40, (n) => `2001:db8::${(n + 1).toString(16)}`) },
  'istio-scratch': { header: 'hash:net family inet', pool: range(16, (n) => `198.51.100.${n * 16}/28`) },
} as const;
type SetName = keyof typeof SETS;
const SWAPPED: readonly SetName[] = ['istio-inpod-probes-v4', 'istio-inpod-probes-v6'];
const SWAP_TEMP = 'istio-swap-tmp';

/** One of its chains: where it lives, what jumps to it, and the rules it may hold (iptables-save's spelling). */
interface ChainSpec {
  readonly restore: 'iptables-restore' | 'ip6tables-restore';
  readonly save: 'iptables-save' | 'ip6tables-save';
  readonly table: 'filter' | 'nat';
  readonly name: string;
  /** The built-in chain that jumps to it (appended once, at the start); none for a chain it deletes and creates. */
  readonly from?: string;
  /** Rules it always holds first. */
  readonly fixed: readonly string[];
  readonly pool: readonly string[];
}

const CHAINS: readonly ChainSpec[] = [
  {
    restore: 'iptables-restore',
    save: 'iptables-save',
    table: 'filter',
    name: 'ISTIO-FWD',
    from: 'FORWARD',
    fixed: ['-m set --match-set istio-inpod-probes-v4 src -j RETURN'],
    pool: range(24, (n) => `-s 192.0.2.${n + 100}/32 -p tcp -m tcp --dport 15008 -j DROP`),
  },
  {
    restore: 'iptables-restore',
    save: 'iptables-save',
    table: 'nat',
    name: 'ISTIO-PRERT',
    from: 'PREROUTING',
    fixed: [],
    pool: range(24, (n) => `-s 192.0.2.${n + 100}/32 -p tcp -m tcp --dport 15006 -j RETURN`),
  },
  {
    restore: 'ip6tables-restore',
    save: 'ip6tables-save',
    table: 'filter',
    name: 'ISTIO-FWD',
    from: 'FORWARD',
    fixed: ['-m set --match-set istio-inpod-probes-v6 src -j RETURN'],
    pool: range(24, (n) => `-s 2001:db8::${(n + 256).toString(16)}/128 -p tcp -m tcp --dport 15008 -j DROP`),
  },
  {
    restore: 'iptables-restore',
    save: 'iptables-save',
    table: 'filter',
    name: 'ISTIO-SCRATCH',
    fixed: [],
    pool: range(16, (n) => `-d 198.51.100.${n * 16}/28 -j DROP`),
  },
];
const SCRATCH_CHAIN = CHAINS[3] as ChainSpec;
/** The tables it reads back: each save tool and table that holds a chain of its own. */
const SAVED = [
  { save: 'iptables-save', table: 'filter' },
  { save: 'iptables-save', table: 'nat' },
  { save: 'ip6tables-save', table: 'filter' },
] as const;

function range<T>(count: number, make: (n: number) => T): T[] {
  return Array.from({ length: count }, (_, n) => make(n));
}

const chainKey = (chain: Pick<ChainSpec, 'save' | 'table' | 'name'>) => `${chain.save} -t ${chain.table} ${chain.name}`;

export const ipsetAndIptablesWriter: ForeignWriter = {
  name: 'ipset and iptables',
  tools: ['ipset', 'iptables-restore', 'iptables-save', 'ip6tables-restore', 'ip6tables-save'],

  async start(netns, seed, onWrite) {
    const random = seededRandom(seed);
    const sets = new Map<string, SetRecord>();
    /** Chain key → its rules (after `-A <chain> `); absent when the chain does not exist. */
    const chains = new Map<string, string[]>();
    const run = (command: string, args: readonly string[], input?: string) => runInNetns(netns, command, args, input);
    const restoreInput = (table: string, lines: readonly string[]) => `*${table}\n${lines.join('\n')}\nCOMMIT\n`;

    const someOf = <T>(pool: readonly T[], most: number): T[] => pool.filter(() => random.chance(most / pool.length));
    type Recorder = (outcome: ToolOutcome) => boolean;
    type Verify = (scope: string) => Promise<void>;
    const writeChain = async (chain: ChainSpec, record: Recorder) => {
      const rules = [...chain.fixed, ...someOf(chain.pool, 4)];
      // Declared with --noflush, the chain is emptied and refilled in one commit; nothing else in the table changes.
      const input = restoreInput(chain.table, [`:${chain.name} - [0:0]`, ...rules.map((rule) => `-A ${chain.name} ${rule}`)]);
      if (record(await run(chain.restore, ['--noflush'], input))) chains.set(chainKey(chain), rules);
    };
    /** One of the probe sets, read back first: what happened to it since its last write shows before this one. */
    const probeSet = async (verify: Verify) => {
      const name = random.pick(SWAPPED);
      await verify(`ipset ${name}`);
      return { name, set: sets.get(name) as SetRecord };
    };

    const addMember = async (record: Recorder, verify: Verify) => {
      // A pod enrolled: its address added, as istio-cni adds it.
      const { name, set } = await probeSet(verify);
      const absent = SETS[name].pool.filter((member) => !set.members.has(member));
      if (absent.length === 0) return;
      const member = random.pick(absent);
      if (record(await run('ipset', ['add', name, member]))) set.members.add(member);
    };
    const deleteMember = async (record: Recorder, verify: Verify) => {
      // A pod gone: its address deleted.
      const { name, set } = await probeSet(verify);
      if (set.members.size === 0) return;
      const member = random.pick([...set.members]);
      if (record(await run('ipset', ['del', name, member]))) set.members.delete(member);
    };
    const writes: ((record: Recorder, verify: Verify) => Promise<void>)[] = [
      // Members come and go most often, as pods do: a member lost or brought back by someone else stays so until the
      // set is rebuilt, which is how kube-router #1918 showed.
      addMember,
      addMember,
      deleteMember,
      deleteMember,
      // The set rebuilt from its informer: filled under another name and swapped in (what kube-router did to it).
      async (record, verify) => {
        const { name, set } = await probeSet(verify);
        const members = someOf(SETS[name].pool, 8);
        const script = [`create ${SWAP_TEMP} ${SETS[name].header}`, ...members.map((member) => `add ${SWAP_TEMP} ${member}`), `swap ${SWAP_TEMP} ${name}`, `destroy ${SWAP_TEMP}`];
        if (record(await run('ipset', ['restore'], `${script.join('\n')}\n`))) set.members = new Set(members);
      },
      // Restarted: flushed.
      async (record, verify) => {
        const { name, set } = await probeSet(verify);
        if (record(await run('ipset', ['flush', name]))) set.members = new Set();
      },
      // A set nothing matches on, destroyed and created again.
      async (record, verify) => {
        const name: SetName = 'istio-scratch';
        await verify(`ipset ${name}`);
        if (sets.has(name)) {
          if (record(await run('ipset', ['destroy', name]))) sets.delete(name);
          return;
        }
        const members = someOf(SETS[name].pool, 4);
        const script = [`create ${name} ${SETS[name].header}`, ...members.map((member) => `add ${name} ${member}`)];
        if (record(await run('ipset', ['restore'], `${script.join('\n')}\n`))) sets.set(name, { header: SETS[name].header, members: new Set(members) });
      },
      // A chain rewritten.
      async (record, verify) => {
        const chain = random.pick(CHAINS.filter((candidate) => candidate.from !== undefined));
        await verify(chainKey(chain));
        await writeChain(chain, record);
      },
      // A chain nothing jumps to, deleted and created again.
      async (record, verify) => {
        const key = chainKey(SCRATCH_CHAIN);
        await verify(key);
        if (!chains.has(key)) return writeChain(SCRATCH_CHAIN, record);
        const input = restoreInput(SCRATCH_CHAIN.table, [`:${SCRATCH_CHAIN.name} - [0:0]`, `-X ${SCRATCH_CHAIN.name}`]);
        if (record(await run(SCRATCH_CHAIN.restore, ['--noflush'], input))) chains.delete(key);
      },
    ];

    const loop: WriterLoop = {
      write: (record, verify) => random.pick(writes)(record, verify),
      readBack: (scope) => readBack(netns, scope),
      expected() {
        const expected = new Map<string, string>();
        for (const [name, set] of sets) expected.set(`ipset ${name}`, setText(set.header, set.members));
        for (const [key, rules] of chains) expected.set(key, rules.join(' | '));
        for (const { save, table } of SAVED) {
          const jumps = CHAINS.filter((chain) => chain.save === save && chain.table === table && chain.from !== undefined);
          if (jumps.length > 0) expected.set(`${save} -t ${table} jumps`, jumps.map((chain) => `-A ${chain.from} -j ${chain.name}`).sort().join(' | '));
        }
        return expected;
      },
      adopt(actual) {
        sets.clear();
        chains.clear();
        for (const [key, text] of actual) {
          const set = /^ipset (\S+)$/.exec(key)?.[1];
          if (set !== undefined) {
            const [, header = '', members = ''] = /^(.*) \[(.*)\]$/.exec(text) ?? [];
            sets.set(set, { header, members: new Set(members === '' ? [] : members.split(' ')) });
          } else if (!key.endsWith(' jumps')) {
            chains.set(key, text === '' ? [] : text.split(' | '));
          }
        }
      },
    };

    // Its objects first, as the tool finds them at its start: the sets, then the chains that match on them.
    const setup = (outcome: ToolOutcome) => {
      if (!outcome.ok) throw new Error(`the foreign writer could not set up: ${outcome.failure}`);
      return true;
    };
    for (const name of Object.keys(SETS) as SetName[]) {
      const script = [`create ${name} ${SETS[name].header}`, ...SETS[name].pool.slice(0, 3).map((member) => `add ${name} ${member}`)];
      setup(await run('ipset', ['restore'], `${script.join('\n')}\n`));
      sets.set(name, { header: SETS[name].header, members: new Set(SETS[name].pool.slice(0, 3)) });
    }
    for (const chain of CHAINS) {
      await writeChain(chain, setup);
      if (chain.from) setup(await run(chain.restore, ['--noflush'], restoreInput(chain.table, [`-A ${chain.from} -j ${chain.name}`])));
    }
    return runWriterLoop(loop, onWrite);
  },

  async agentState(netns) {
    const parts: string[] = [];
    for (const save of ['iptables-save', 'ip6tables-save']) {
      const lines = (await readOrThrow(netns, save, ['-t', 'filter'])).split('\n').filter((line) => AGENT.test(line));
      parts.push(`${save}:`, ...chainsInOrder(lines.map((line) => line.replace(/ \[\d+:\d+\]$/, ''))));
    }
    const sets = await saveSets(netns, (name) => AGENT.test(name));
    for (const [name, set] of [...sets].sort(([a], [b]) => a.localeCompare(b))) parts.push(`ipset ${name} ${setText(set.header, set.members)}`);
    return parts.join('\n');
  },
};

/**
 * Its objects as the kernel holds them, keyed as `expected()` keys them; with a scope (`ipset <name>`, or a chain's
 * key), only that set, or only that chain's table.
 */
async function readBack(netns: string | undefined, scope?: string): Promise<Map<string, string>> {
  const actual = new Map<string, string>();
  const setScope = scope?.startsWith('ipset ') ? scope.slice('ipset '.length) : undefined;
  if (scope === undefined || setScope !== undefined) {
    const sets = await saveSets(netns, (name) => (setScope === undefined ? name.startsWith(PREFIX) : name === setScope));
    for (const [name, set] of sets) actual.set(`ipset ${name}`, setText(set.header, set.members));
  }
  for (const { save, table } of SAVED) {
    if (scope !== undefined && !scope.startsWith(`${save} -t ${table} `)) continue;
    const lines = (await readOrThrow(netns, save, ['-t', table])).split('\n');
    const jumps: string[] = [];
    for (const line of lines) {
      const declared = /^:(\S+) /.exec(line)?.[1];
      if (declared?.startsWith(CHAIN_PREFIX)) {
        const key = `${save} -t ${table} ${declared}`;
        if (!actual.has(key)) actual.set(key, '');
        continue;
      }
      const rule = /^-A (\S+) (.*)$/.exec(line);
      if (!rule) continue;
      const [, chain = '', spec = ''] = rule;
      if (chain.startsWith(CHAIN_PREFIX)) {
        const key = `${save} -t ${table} ${chain}`;
        const before = actual.get(key);
        actual.set(key, before ? `${before} | ${spec}` : spec);
      } else if (/-j ISTIO-/.test(spec)) {
        jumps.push(line);
      }
    }
    if (jumps.length > 0) actual.set(`${save} -t ${table} jumps`, jumps.sort().join(' | '));
  }
  return actual;
}

/**
 * The sets whose names `which` takes, with their members. By name, in one `ipset restore` of `save <name>` lines: a
 * listing of every set with its members (`ipset save`) holds each set, the other tool's too, while it is dumped, and
 * the kernel refuses to swap or destroy a set being dumped (EBUSY), so the reads of a test would fail the writes it
 * watches.
 */
async function saveSets(netns: string | undefined, which: (name: string) => boolean): Promise<Map<string, { header: string; members: string[] }>> {
  const names = (await readOrThrow(netns, 'ipset', ['list', '-n'])).split('\n').filter((name) => name !== '' && which(name));
  if (names.length === 0) return new Map();
  const outcome = await runInNetns(netns, 'ipset', ['restore'], `${names.map((name) => `save ${name}`).join('\n')}\n`);
  if (!outcome.ok) throw new Error(`read-back failed: ${outcome.failure}`);
  return parseIpsetSave(outcome.stdout);
}

function setText(header: string, members: Iterable<string>): string {
  return `${header} [${[...members].sort().join(' ')}]`;
}

/** `ipset save` output by set: its type and family, and its members. */
function parseIpsetSave(saved: string): Map<string, { header: string; members: string[] }> {
  const sets = new Map<string, { header: string; members: string[] }>();
  for (const line of saved.split('\n')) {
    const words = line.split(' ');
    const [verb, name = ''] = words;
    if (verb === 'create') {
      const family = words.indexOf('family');
      sets.set(name, { header: [words[2], ...(family > 0 ? words.slice(family, family + 2) : [])].join(' '), members: [] });
    } else if (verb === 'add') {
      sets.get(name)?.members.push(words.slice(2).join(' '));
    }
  }
  return sets;
}

/**
 * iptables-save lines with the declarations sorted and each chain's rules kept in their order, the chains sorted:
 * the same rules whichever order the chains were created in.
 */
function chainsInOrder(lines: readonly string[]): string[] {
  const declarations = lines.filter((line) => line.startsWith(':')).sort();
  const rules = new Map<string, string[]>();
  for (const line of lines) {
    const chain = /^-A (\S+) /.exec(line)?.[1];
    if (chain !== undefined) rules.set(chain, [...(rules.get(chain) ?? []), line]);
  }
  return [...declarations, ...[...rules].sort(([a], [b]) => a.localeCompare(b)).flatMap(([, chainRules]) => chainRules)];
}
