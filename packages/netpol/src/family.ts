import ipaddr from 'ipaddr.js';
import type { CompiledRule, IpBlock, IpFamily } from './model.js';

/** The peers of a rule in one family, as a renderer needs them. */
export interface FamilyPeers {
  /** Every address of the family. */
  readonly any: boolean;
  readonly pods: readonly string[];
  readonly ipBlocks: readonly IpBlock[];
  /** Not `any` and nothing listed: the rule allows nothing in this family and can be left out of its rendering. */
  readonly empty: boolean;
}

export function peersInFamily(rule: CompiledRule, family: IpFamily): FamilyPeers {
  const pods = rule.peers.pods[family];
  const ipBlocks = rule.peers.ipBlocks[family];
  return {
    any: rule.peers.any,
    pods,
    ipBlocks,
    empty: !rule.peers.any && pods.length === 0 && ipBlocks.length === 0,
  };
}

/** The family of a CIDR or address; throws a readable error for anything else. */
export function cidrFamily(text: string): IpFamily {
  try {
    const address = text.includes('/') ? ipaddr.parseCIDR(text)[0] : ipaddr.parse(text);
    return address.kind();
  } catch {
    throw new RangeError(`not a CIDR: ${JSON.stringify(text)}`);
  }
}

/**
 * An object with a property per family whose value is rendered when it is first read, once. An apply that writes
 * one table while it builds the next reads the next family's render only then; a backend that never reads a render
 * never pays for it.
 */
export function renderedOnRead<T>(families: readonly IpFamily[], render: (family: IpFamily) => T): Readonly<Partial<Record<IpFamily, T>>> {
  const rendered: Partial<Record<IpFamily, T>> = {};
  const onRead: Partial<Record<IpFamily, T>> = {};
  for (const family of families) {
    Object.defineProperty(onRead, family, { enumerable: true, get: () => (rendered[family] ??= render(family)) });
  }
  return onRead;
}
