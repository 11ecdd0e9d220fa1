import type { IpFamily } from '@kube-router/netpol';
import type { KnownSet } from './kernel-state.js';
import { TABLES } from './names.js';
import { deleteElementLines, setDeclaration } from './objects.js';
import type { SetRender } from './objects.js';

// How a transaction's script is written: table blocks, element changes, and when two tables share one nft process.

export function tableRef(family: IpFamily): string {
  return `${TABLES[family].family} ${TABLES[family].name}`;
}

/**
 * One family's share of a transaction. New objects go in one `table <family> <name> { ... }` block: nft parses and
 * evaluates a block with far less work than the same objects as one `add` command each (on the benchmark's table,
 * the flat commands cost nft 16% more than its own listing of the result; a block, as much as the listing).
 */
export interface TablePart {
  readonly family: IpFamily;
  /** The table when it is new; flushes of chains that the block fills again. */
  readonly before: readonly string[];
  /** New sets and maps with their elements; chains with their rules. */
  readonly block: readonly string[];
  /** Element changes of sets the kernel holds: after the block, whose chains a map's new elements may jump to. */
  readonly after: readonly string[];
}

/** The script of a transaction: per family, what goes before its block, the block, what goes after. */
export function assemble(parts: readonly TablePart[]): string[] {
  const byFamily = new Map<IpFamily, { before: Set<string>; block: string[]; after: string[] }>();
  // Appended line by line, never spread into a call: a full sync of a large cluster has more lines per table than a
  // call takes arguments (V8 throws a RangeError somewhere above 100,000).
  const append = (to: string[], lines: Iterable<string>) => {
    for (const line of lines) to.push(line);
  };
  for (const part of parts) {
    let merged = byFamily.get(part.family);
    if (!merged) byFamily.set(part.family, (merged = { before: new Set(), block: [], after: [] }));
    for (const line of part.before) merged.before.add(line);
    append(merged.block, part.block);
    append(merged.after, part.after);
  }
  const lines: string[] = [];
  for (const [family, { before, block, after }] of byFamily) {
    append(lines, before);
    if (block.length > 0) {
      lines.push(`table ${tableRef(family)} {`);
      append(lines, block);
      lines.push('}');
    }
    append(lines, after);
  }
  return lines;
}

/**
 * Below this many characters a table's script, the two tables' transactions go in one nft process. Each nft process
 * reads every chain and set of the namespace before it writes (nft 1.0.6: 1-3 µs an object, both tables'
 * objects); two processes read them twice, on the CPUs the agent needs. Above it, parsing the scripts costs more, and
 * two processes overlap it. Counted in characters, not lines: one line may hold 500 set elements.
 */
export const COMBINE_BELOW_CHARACTERS = 64 * 1024;

export function scriptSize(lines: readonly string[]): number {
  let size = 0;
  for (const line of lines) size += line.length + 1;
  return size;
}

/**
 * The lines that make a set hold exactly `wanted`. Additions go in the set's declaration (see setDeclaration). Before
 * a `delete element`, nft 1.0.6 reads every chain of the namespace; a set small beside that is refilled instead, in
 * the same transaction (packets see the old elements or the new ones, never none), which costs what its elements
 * cost. In a namespace with the benchmark's 2,764 chains, a delete took 27 ms, a refill of 55 elements 4 ms and one
 * of 1,000 elements as long as the delete: below a quarter of the chains read, the refill is the cheaper one.
 */
export function setScript(table: string, wanted: SetRender, known: KnownSet, chainsRead: number): string[] {
  const sameShape = known.type === wanted.type && known.map === wanted.map && known.interval === (wanted.kind === 'interval');
  // A set of another type under our name is declared again as we want it: the kernel refuses, and the policy fails.
  if (!sameShape) return [setDeclaration(table, wanted, wanted.elements)];
  const refill = () => [`flush ${wanted.map ? 'map' : 'set'} ${table} ${wanted.name}`, setDeclaration(table, wanted, wanted.elements)];
  // Ranges cannot be added next to overlapping ones: an interval set is always refilled.
  if (wanted.kind === 'interval') return refill();
  const wantedSet = new Set(wanted.elements);
  const removed = [...known.elements].filter((element) => !wantedSet.has(element));
  const added = wanted.elements.filter((element) => !known.elements.has(element));
  if (removed.length === 0) return [setDeclaration(table, wanted, added)];
  if (wanted.elements.length * REFILL_BELOW_CHAINS_PER_ELEMENT < chainsRead) return refill();
  const keyOf = (element: string) => (wanted.map ? element.split(' : ')[0] ?? element : element);
  // Deletes first: a map key that moves to another chain is deleted with its old verdict, then added with its new one.
  return [...deleteElementLines(table, wanted.name, removed.map(keyOf)), setDeclaration(table, wanted, added)];
}

/** A set is refilled rather than changed by `delete element` when nft would read this many times more chains. */
const REFILL_BELOW_CHAINS_PER_ELEMENT = 4;
