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
  return `"${text.replace(/["\\\n]/g, '').slice(0, MAX_COMMENT)}"`;
}

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

/** A new set or verdict map with its elements, inside a table block; a few hundred elements per line. */
export function setBlock(set: SetRender): string[] {
  const lines = [`${set.map ? 'map' : 'set'} ${set.name} { ${setSpec(set)}`];
  if (set.elements.length > 0) lines.push(`elements = { ${elementGroups(set.elements).join(',\n')} }`);
  lines.push('}');
  return lines;
}

export function setDeclaration(table: string, set: SetRender): string {
  return `add ${set.map ? 'map' : 'set'} ${table} ${set.name} { ${setSpec(set)} }`;
}

/** `add element` / `delete element` lines, a few hundred elements each. */
export function elementLines(verb: 'add' | 'delete', table: string, name: string, elements: readonly string[]): string[] {
  return elementGroups(elements).map((group) => `${verb} element ${table} ${name} { ${group} }`);
}
