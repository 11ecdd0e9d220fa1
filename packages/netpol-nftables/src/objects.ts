import { createHash } from 'node:crypto';

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
  const digest = createHash('sha256')
    .update(rules.map((rule) => `${rule.text}\0${rule.comment ?? ''}`).join('\n'))
    .update(hook ?? '')
    .digest('base64url')
    .slice(0, 12);
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

/**
 * The lines of `nft -f` that replace a chain's rules atomically (the transaction adds, flushes and refills it).
 * A chain the kernel does not hold yet is not flushed: on a full sync from an empty kernel the flushes of thousands
 * of new chains were a fifth of the kernel's time.
 */
export function chainScript(table: string, chainRender: ChainRender, inKernel = true): string[] {
  const lines: string[] = [];
  if (chainRender.hook) {
    lines.push(`add chain ${table} ${chainRender.name} { type filter hook ${chainRender.hook} priority filter; policy accept; }`);
  } else {
    lines.push(`add chain ${table} ${chainRender.name}`);
  }
  if (inKernel) lines.push(`flush chain ${table} ${chainRender.name}`);
  chainRender.rules.forEach((rule, index) => {
    const base = rule.comment ?? '';
    // The tag must survive nft's comment limit: the text before it is shortened instead.
    const tag = `[rev ${chainRender.digest}]`;
    const comment = index === 0 ? `${base.slice(0, MAX_COMMENT - tag.length - 1)} ${tag}`.trim() : base;
    lines.push(`add rule ${table} ${chainRender.name} ${rule.text}${comment ? ` comment ${quoteComment(comment)}` : ''}`);
  });
  return lines;
}

export function setDeclaration(table: string, set: SetRender): string {
  const flags = set.kind === 'interval' ? ' flags interval;' : '';
  const type = set.map ? `type ${set.type} : ${set.map};` : `type ${set.type};`;
  return `add ${set.map ? 'map' : 'set'} ${table} ${set.name} { ${type}${flags} }`;
}

/** `add element` / `delete element` lines, a few hundred elements each so that no line grows without bound. */
export function elementLines(verb: 'add' | 'delete', table: string, name: string, elements: readonly string[]): string[] {
  const lines: string[] = [];
  for (let start = 0; start < elements.length; start += 500) {
    lines.push(`${verb} element ${table} ${name} { ${elements.slice(start, start + 500).join(', ')} }`);
  }
  return lines;
}
