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
