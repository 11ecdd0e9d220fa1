import { blamedInputLine } from './blamed-line.js';

/** A chain we own, declared (and so flushed) by the restore and then filled with `rules`. */
export interface RestoreChain {
  readonly name: string;
  /** Each rule as it follows `-A <chain> `, for example `-p tcp --dport 80 -j ACCEPT`. */
  readonly rules: readonly string[];
}

export interface RestoreTable {
  /** filter, nat, mangle, raw. */
  readonly table: string;
  readonly chains: readonly RestoreChain[];
  /**
   * Complete rule lines applied after our chains are filled, for rules in chains we do not own and so must not
   * declare, for example `-I FORWARD 1 -m comment --comment "kube-router netpol" -j KUBE-ROUTER-FORWARD`.
   */
  readonly lines?: readonly string[];
  /** Our chains to delete: declared (so emptied), then `-X`. Nothing may still jump into them. */
  readonly deleteChains?: readonly string[];
}

const BUILTIN_CHAINS = new Set(['INPUT', 'FORWARD', 'OUTPUT', 'PREROUTING', 'POSTROUTING']);
/** XT_EXTENSION_MAXNAMELEN is 29 including the terminating NUL. */
export const MAX_CHAIN_NAME_LENGTH = 28;

/**
 * Renders input for `iptables-restore --noflush`. Only the chains listed are declared, and with --noflush a declared
 * chain is flushed and refilled while everything else in the table (built-in chains, other tools' chains) is left
 * alone. Built-in chains are refused here because declaring one would reset its policy or flush it.
 */
export function renderIptablesRestore(tables: readonly RestoreTable[]): string {
  const out: string[] = [];
  for (const table of tables) {
    const deleted = table.deleteChains ?? [];
    for (const name of [...table.chains.map((chain) => chain.name), ...deleted]) assertOwnChainName(name);
    out.push(`*${table.table}`);
    for (const chain of table.chains) out.push(`:${chain.name} - [0:0]`);
    for (const name of deleted) out.push(`:${name} - [0:0]`);
    for (const chain of table.chains) {
      for (const rule of chain.rules) {
        assertSingleLine(rule);
        out.push(rule === '' ? `-A ${chain.name}` : `-A ${chain.name} ${rule}`);
      }
    }
    for (const line of table.lines ?? []) {
      assertSingleLine(line);
      out.push(line);
    }
    for (const name of deleted) out.push(`-X ${name}`);
    out.push('COMMIT');
  }
  return out.length === 0 ? '' : `${out.join('\n')}\n`;
}

export function assertOwnChainName(name: string): void {
  if (!/^[A-Za-z0-9_.-]+$/.test(name) || name.startsWith('-')) {
    throw new RangeError(`invalid chain name ${JSON.stringify(name)}`);
  }
  if (name.length > MAX_CHAIN_NAME_LENGTH) {
    throw new RangeError(`chain name ${name} is longer than ${MAX_CHAIN_NAME_LENGTH} characters`);
  }
  if (BUILTIN_CHAINS.has(name)) {
    throw new RangeError(`refusing to declare built-in chain ${name}: a --noflush restore would flush it`);
  }
}

function assertSingleLine(line: string): void {
  if (/[\r\n]/.test(line)) throw new RangeError(`restore line contains a line break: ${JSON.stringify(line)}`);
}

/**
 * The input line an iptables-restore failure is about. The legacy backend names the failing line; the nf_tables
 * backend checks everything at COMMIT and names that line, but quotes the object it could not find ("Chain 'X' does
 * not exist"), so the first rule that mentions it is blamed instead.
 */
export function blameRestoreFailure(stderr: string, input: string): { line: number; text: string } | undefined {
  const blamed = blamedInputLine(stderr, input);
  if (blamed && blamed.text !== 'COMMIT') return blamed;
  const quoted = /'([^'\s]+)'/.exec(stderr)?.[1];
  if (quoted) {
    const lines = input.split('\n');
    const index = lines.findIndex((text) => !text.startsWith(':') && text.split(' ').includes(quoted));
    if (index >= 0) return { line: index + 1, text: lines[index] as string };
  }
  return blamed;
}
