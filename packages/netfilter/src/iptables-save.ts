import { splitWords } from './shell-words.js';

export interface SavedRule {
  readonly chain: string;
  /** The rule as saved, without `-A <chain> `. Feeding it back after `-A <chain>` recreates the rule. */
  readonly spec: string;
  /** `spec` split into words, quotes removed. */
  readonly args: readonly string[];
  /** The `-j`/`-g` target, if any. */
  readonly target: string | undefined;
  /** The `-m comment --comment` text, if any. */
  readonly comment: string | undefined;
  /** The rule's packet and byte counters, when the output was saved with `-c` (`[packets:bytes] -A ...`). */
  readonly counters?: { readonly packets: number; readonly bytes: number };
}

export interface SavedChain {
  readonly name: string;
  readonly builtin: boolean;
  /** The policy of a built-in chain (ACCEPT, DROP); undefined for user chains. */
  readonly policy: string | undefined;
  readonly rules: readonly SavedRule[];
}

export interface SavedTable {
  readonly name: string;
  /** In the order iptables-save printed them. */
  readonly chains: readonly SavedChain[];
}

/** What we own in a table: the chains named with our prefix, and the rules elsewhere that jump into them. */
export interface OwnChains {
  readonly table: string;
  readonly chains: readonly SavedChain[];
  /** Rules in chains without our prefix (FORWARD, another tool's chain) whose target has our prefix. */
  readonly jumpsIn: readonly SavedRule[];
}

/**
 * Parses iptables-save (or ip6tables-save) output of any backend. Comments are ignored; a rule's counters (`-c`) are
 * kept in `counters`, chains' counters ignored.
 */
export function parseIptablesSave(text: string): SavedTable[] {
  const tables: SavedTable[] = [];
  let chains:
    | Map<string, { name: string; builtin: boolean; policy: string | undefined; rules: SavedRule[] }>
    | undefined;
  let tableName = '';
  const lines = text.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const line = (lines[index] as string).trim();
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('*')) {
      tableName = line.slice(1);
      chains = new Map();
    } else if (line === 'COMMIT') {
      if (!chains) throw new SyntaxError(`iptables-save line ${index + 1}: COMMIT outside a table`);
      tables.push({ name: tableName, chains: [...chains.values()] });
      chains = undefined;
    } else if (line.startsWith(':')) {
      if (!chains) throw new SyntaxError(`iptables-save line ${index + 1}: chain outside a table`);
      const [name = '', policy = '-'] = line.slice(1).split(' ');
      chains.set(name, { name, builtin: policy !== '-', policy: policy === '-' ? undefined : policy, rules: [] });
    } else if (line.startsWith('-A ') || line.startsWith('[')) {
      if (!chains) throw new SyntaxError(`iptables-save line ${index + 1}: rule outside a table`);
      const counted = COUNTED_RULE.exec(line);
      if (line.startsWith('[') && !counted) throw new SyntaxError(`iptables-save line ${index + 1}: unexpected ${JSON.stringify(line)}`);
      const rule = counted
        ? { ...parseRule(counted[3] as string), counters: { packets: Number(counted[1]), bytes: Number(counted[2]) } }
        : parseRule(line);
      let chain = chains.get(rule.chain);
      if (!chain) {
        chain = { name: rule.chain, builtin: false, policy: undefined, rules: [] };
        chains.set(rule.chain, chain);
      }
      chain.rules.push(rule);
    } else {
      throw new SyntaxError(`iptables-save line ${index + 1}: unexpected ${JSON.stringify(line)}`);
    }
  }
  if (chains) throw new SyntaxError(`iptables-save: table ${tableName} has no COMMIT`);
  return tables;
}

/** `[packets:bytes] -A ...`, as `iptables-save -c` prints a rule. */
const COUNTED_RULE = /^\[(\d+):(\d+)\] (-A .*)$/;

function parseRule(line: string): SavedRule {
  const afterAppend = line.slice(3);
  const space = afterAppend.indexOf(' ');
  const chain = space < 0 ? afterAppend : afterAppend.slice(0, space);
  const spec = space < 0 ? '' : afterAppend.slice(space + 1);
  const args = splitWords(spec);
  return {
    chain,
    spec,
    args,
    target: valueAfter(args, ['-j', '--jump', '-g', '--goto']),
    comment: valueAfter(args, ['--comment']),
  };
}

function valueAfter(args: readonly string[], flags: readonly string[]): string | undefined {
  for (let i = 0; i < args.length - 1; i++) if (flags.includes(args[i] as string)) return args[i + 1];
  return undefined;
}

/** Our chains (those whose name starts with `prefix`) of one table, and the rules that jump into them. */
export function selectOwnChains(table: SavedTable, prefix: string): OwnChains {
  const chains = table.chains.filter((chain) => chain.name.startsWith(prefix));
  const jumpsIn = table.chains
    .filter((chain) => !chain.name.startsWith(prefix))
    .flatMap((chain) => chain.rules.filter((rule) => rule.target?.startsWith(prefix)));
  return { table: table.name, chains, jumpsIn };
}
