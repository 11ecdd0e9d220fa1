import { hash } from 'node:crypto';

/** One rule: its statement text and a comment. */
export interface NftRuleText {
  readonly text: string;
  readonly comment?: string;
}

/** A regular chain, or a base chain when `hook` is set. */
export interface ChainRender {
  readonly name: string;
  readonly rules: readonly NftRuleText[];
  /** Equal digests mean equal rules; it is written into the first rule's comment, so a restart can adopt the chain. */
  readonly digest: string;
  readonly hook?: 'input' | 'forward' | 'output';
}

export type SetKind = 'hash' | 'interval';

/** A named set or verdict map as we want it; `elements` in canonical text (see interval.ts for interval sets). */
export interface SetRender {
  readonly name: string;
  /** `ipv4_addr`, `ipv6_addr . inet_proto . inet_service`, ... */
  readonly type: string;
  readonly kind: SetKind;
  /** `verdict` for a verdict map; then every element is `key : verdict`. */
  readonly map?: 'verdict';
  readonly elements: readonly string[];
}

const REV = /\s*\[rev ([A-Za-z0-9_-]{12})\]$/;

export function chain(name: string, rules: readonly NftRuleText[], hook?: ChainRender['hook']): ChainRender {
  const digest = hash('sha256', rules.map((rule) => `${rule.text}\0${rule.comment ?? ''}`).join('\n') + (hook ?? ''), 'base64url').slice(0, 12);
  return hook ? { name, rules, digest, hook } : { name, rules, digest };
}

/** The digest a chain read back from the kernel carries in its first rule's comment. */
export function revisionOf(firstRuleComment: string | undefined): string | undefined {
  return firstRuleComment === undefined ? undefined : REV.exec(firstRuleComment)?.[1];
}

/** nft keeps at most 128 bytes of a comment (with its terminating NUL). */
const MAX_COMMENT = 127;

/** Comments hold names and fixed words only; quotes and backslashes are stripped to be safe. */
export function quoteComment(text: string): string {
  // Tested before replaced: a full sync quotes thousands of comments, next to none of which hold such a character.
  const safe = UNSAFE_IN_COMMENT.test(text) ? text.replace(UNSAFE_IN_COMMENTS, '') : text;
  return `"${safe.length > MAX_COMMENT ? safe.slice(0, MAX_COMMENT) : safe}"`;
}

const UNSAFE_IN_COMMENT = /["\\\n]/;
const UNSAFE_IN_COMMENTS = /["\\\n]/g;

/** A chain's rules as statements, the first one's comment carrying the chain's digest. */
function ruleStatements(chainRender: ChainRender): string[] {
  const tag = `[rev ${chainRender.digest}]`;
  return chainRender.rules.map((rule, index) => {
    const base = rule.comment ?? '';
    // The tag must survive nft's comment limit: the text before it is shortened instead.
    const comment = index === 0 ? `${base.slice(0, MAX_COMMENT - tag.length - 1)} ${tag}`.trim() : base;
    return `${rule.text}${comment ? ` comment ${quoteComment(comment)}` : ''}`;
  });
}

function hookDeclaration(hook: NonNullable<ChainRender['hook']>): string {
  return `type filter hook ${hook} priority filter; policy accept;`;
}

/**
 * A chain with its rules, inside a table block (see TablePart in kernel.ts). Added to a chain that exists, the rules are
 * appended: a chain the kernel holds is flushed before the block.
 */
export function chainBlock(chainRender: ChainRender): string[] {
  return [
    `chain ${chainRender.name} {`,
    ...(chainRender.hook ? [hookDeclaration(chainRender.hook)] : []),
    ...ruleStatements(chainRender),
    '}',
  ];
}

/** `type …; flags …;` of a set or verdict map. */
function setSpec(set: SetRender): string {
  const flags = set.kind === 'interval' ? ' flags interval;' : '';
  return `${set.map ? `type ${set.type} : ${set.map};` : `type ${set.type};`}${flags}`;
}

/** Elements a few hundred to a line, so that no line grows without bound. */
function elementGroups(elements: readonly string[]): string[] {
  const groups: string[] = [];
  for (let start = 0; start < elements.length; start += 500) groups.push(elements.slice(start, start + 500).join(', '));
  return groups;
}

/** `elements = { … }`, a few hundred elements per line; nothing for none. */
function elementsClause(elements: readonly string[]): string {
  return elements.length === 0 ? '' : `elements = { ${elementGroups(elements).join(',\n')} }`;
}

/** A new set or verdict map with its elements, inside a table block. */
export function setBlock(set: SetRender): string[] {
  const lines = [`${set.map ? 'map' : 'set'} ${set.name} { ${setSpec(set)}`];
  if (set.elements.length > 0) lines.push(elementsClause(set.elements));
  lines.push('}');
  return lines;
}

/**
 * `add set` (or `add map`) of a set as we want it, adding `elements` to it. On a set the kernel holds, this is how
 * elements are added: nft 1.0.6 reads every chain of the namespace before an `add element` command (a verdict map's
 * element may jump to one), and only the table before an `add set`, so the same addition costs the same whatever
 * the number of policies (in a namespace with the benchmark's 2,764 chains: 8 ms, against 17 ms as `add element`).
 * The kernel checks a jump to a chain all the same. A set of another type under our name is refused.
 */
export function setDeclaration(table: string, set: SetRender, elements: readonly string[] = []): string {
  const added = elementsClause(elements);
  return `add ${set.map ? 'map' : 'set'} ${table} ${set.name} { ${setSpec(set)}${added ? ` ${added}` : ''} }`;
}

/** `delete element` lines, a few hundred elements each. */
export function deleteElementLines(table: string, name: string, keys: readonly string[]): string[] {
  return elementGroups(keys).map((group) => `delete element ${table} ${name} { ${group} }`);
}
