import { createHash } from 'node:crypto';
import type { IpsetMember, IpsetSpec } from '@kube-router/netfilter';

/** A chain as we want it in the kernel. */
export interface ChainRender {
  readonly name: string;
  /** Each rule as it follows `-A <chain> `. */
  readonly rules: readonly string[];
  /** Equal digests mean equal rules: the chain need not be written again. */
  readonly digest: string;
}

/** An ipset as we want it in the kernel. */
export interface SetRender {
  readonly spec: IpsetSpec;
  readonly members: readonly IpsetMember[];
  /** Computed from the normalised members, so that it can be compared with what `ipset save` reports. */
  readonly digest: string;
}

export function chain(name: string, rules: readonly string[]): ChainRender {
  return { name, rules, digest: digestOf(rules.join('\n')) };
}

export function ipset(spec: IpsetSpec, members: readonly IpsetMember[]): SetRender {
  return { spec, members, digest: setDigest(spec.type, members.map(memberText)) };
}

/** `ipset save` prints host entries of hash:net without /32 or /128 and `nomatch` after the element. */
export function normaliseMember(text: string): string {
  const [element = '', ...flags] = text.trim().split(/\s+/);
  const host = element.replace(/\/(32|128)$/, '');
  return flags.includes('nomatch') ? `${host} nomatch` : host;
}

export function setDigest(type: string, memberTexts: readonly string[]): string {
  const normalised = memberTexts.map(normaliseMember).sort();
  return digestOf(`${type}\n${normalised.join('\n')}`);
}

function memberText(member: IpsetMember): string {
  return typeof member === 'string' ? member : `${member.element}${member.nomatch ? ' nomatch' : ''}`;
}

function digestOf(text: string): string {
  return createHash('sha256').update(text).digest('base64url');
}

/** `-m comment --comment "..."`; comments hold only names and fixed words, but quotes are stripped to be safe. */
export function comment(text: string): string {
  return `-m comment --comment "${text.replace(/["\\]/g, '').slice(0, 255)}"`;
}
