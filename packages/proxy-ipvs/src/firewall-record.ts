import { hash } from 'node:crypto';
import { canonicalIpvsAddress } from '@kube-router/netfilter';
import type { IpFamily, SavedIpset, SavedRule } from '@kube-router/netfilter';
import type { ProxyChainsFound, ProxyChainsWritten, ProxySetWritten } from './dataplane.js';

/** One of our chains as this process last wrote it. */
interface WrittenChain {
  /** A hash of its rules as rendered. */
  readonly rendered: string;
  readonly ruleCount: number;
  /**
   * A hash of the same rendering as iptables-save spells it (its own way, not ours), taken by the first read-back that
   * found the chain with the count written; undefined until then. Kept while the rendering stays the same: writing the
   * same rules again gives the same spelling.
   */
  readonly spelling?: string;
}

/** What a read-back of a family's chains found changed behind the proxy. */
export interface ChainDrift {
  /** `<family>/<chain>` of a chain gone, flushed or holding other rules; `<family>/<BUILTIN> -j <chain>` of a jump gone. */
  readonly names: readonly string[];
  /** Chains whose rules were changed in place (same count): read them back once rewritten (recordSpelling). */
  readonly changedInPlace: readonly string[];
}

/**
 * What this process last wrote of the proxy's own chains, jumps and ipsets, so that a full sync's read-back tells
 * what someone else changed since (drift), as the netpol iptables backend's KernelApplier does for its own objects.
 *
 * "As the proxy left it" is what this process wrote: a chain with the rule count written and, once a read-back has
 * seen that rendering, the same rules as iptables-save spelled them then; a jump it added or found; a set with the
 * members written. Objects it never wrote are adopted as found and count nothing: after a restart, the first sync's
 * read-back has no record, rewrites everything as every full sync does, and the record starts from that write. What
 * changed while no agent ran is repaired by that sync without being counted. A write that fails forgets the family's
 * record (a failed restore may have left the objects half-written), so a failure is never counted as drift later.
 */
export class FirewallRecord {
  /** By `<family>/<chain>`. */
  readonly #chains = new Map<string, WrittenChain>();
  /** `<family>/<BUILTIN> -j <chain>` of the jumps in place after the last write. */
  readonly #jumps = new Set<string>();
  /** By set name: the members written, normalised and sorted, one per line. */
  readonly #sets = new Map<string, string>();

  /** The chains and jumps of a family that are no longer as written, and records the spelling of those that are. */
  chainDrift(family: IpFamily, found: ProxyChainsFound): ChainDrift {
    const names: string[] = [];
    const changedInPlace: string[] = [];
    for (const [id, written] of this.#chains) {
      const name = chainOf(family, id);
      if (name === undefined) continue;
      const saved = found.chains.get(name);
      if (!saved || saved.rules.length !== written.ruleCount) {
        names.push(id);
        continue;
      }
      const spelling = spellingOf(saved.rules);
      if (written.spelling === undefined) {
        this.#chains.set(id, { ...written, spelling });
      } else if (written.spelling !== spelling) {
        names.push(id);
        changedInPlace.push(name);
      }
    }
    for (const jump of this.#jumps) {
      const spec = chainOf(family, jump);
      if (spec !== undefined && !found.jumps.has(spec)) names.push(jump);
    }
    return { names, changedInPlace };
  }

  chainsWritten(family: IpFamily, written: ProxyChainsWritten): void {
    for (const chain of written.chains) {
      const id = `${family}/${chain.name}`;
      const rendered = hash('sha1', chain.rules.join('\n'), 'base64');
      const before = this.#chains.get(id);
      const spelling = before?.rendered === rendered ? before.spelling : undefined;
      this.#chains.set(id, { rendered, ruleCount: chain.rules.length, ...(spelling !== undefined && { spelling }) });
    }
    for (const jump of this.#jumps) if (chainOf(family, jump) !== undefined) this.#jumps.delete(jump);
    for (const jump of written.jumps) this.#jumps.add(`${family}/${jump}`);
  }

  /**
   * After rules changed in place were written again: their spelling is what the kernel holds now, so that the same
   * edit made again is found by the next read-back, and a spelling once taken from an edit does not count for ever.
   */
  recordSpelling(family: IpFamily, found: ProxyChainsFound, names: readonly string[]): void {
    for (const name of names) {
      const id = `${family}/${name}`;
      const written = this.#chains.get(id);
      const saved = found.chains.get(name);
      if (written && saved?.rules.length === written.ruleCount) this.#chains.set(id, { ...written, spelling: spellingOf(saved.rules) });
    }
  }

  forgetChains(family: IpFamily): void {
    for (const id of this.#chains.keys()) if (chainOf(family, id) !== undefined) this.#chains.delete(id);
    for (const jump of this.#jumps) if (chainOf(family, jump) !== undefined) this.#jumps.delete(jump);
  }

  /** The sets among `names` written by this process that are gone or hold other members now. */
  setDrift(names: readonly string[], found: ReadonlyMap<string, SavedIpset>): string[] {
    return names.filter((name) => {
      const written = this.#sets.get(name);
      if (written === undefined) return false;
      const saved = found.get(name);
      return !saved || membersKey(saved.members) !== written;
    });
  }

  setsWritten(sets: readonly ProxySetWritten[]): void {
    for (const set of sets) this.#sets.set(set.name, membersKey(set.members));
  }

  forgetSets(names: readonly string[]): void {
    for (const name of names) this.#sets.delete(name);
  }
}

/** The rest of `id` after `<family>/`, or undefined for another family's. */
function chainOf(family: IpFamily, id: string): string | undefined {
  return id.startsWith(`${family}/`) ? id.slice(family.length + 1) : undefined;
}

/** A chain's rules as iptables-save printed them, hashed: equal for the same rules saved again. */
function spellingOf(rules: readonly SavedRule[]): string {
  return hash('sha1', rules.map((rule) => rule.spec).join('\n'), 'base64');
}

/**
 * Members compared by what they mean, not by spelling: the address part (`10.96.0.2`, `fd00:96::2` before
 * `,tcp:80`) in canonical form, as ipset prints addresses in its own way; each once, as a set holds it (a node has the
 * same address on several interfaces, 169.254.1.1 on every pod's veth for one).
 */
function membersKey(members: readonly string[]): string {
  const meant = members.map((member) => {
    const comma = member.indexOf(',');
    const address = comma < 0 ? member : member.slice(0, comma);
    let canonical = address;
    try {
      canonical = canonicalIpvsAddress(address);
    } catch {
      // Not an address we wrote: compared as printed.
    }
    return comma < 0 ? canonical : `${canonical}${member.slice(comma)}`;
  });
  return [...new Set(meant)].sort().join('\n');
}
