import { iptablesBinary, kernelHasFamily } from '@kube-router/netfilter';
import type { CommandRunner, IpFamily, IptablesBackend } from '@kube-router/netfilter';
import type { KernelSnapshot } from './diff-print.js';

/** What the diff reads and copies: the tables and sets a firewall backend reads, writes or removes. */
export interface ScratchScope {
  readonly iptablesBackend: IptablesBackend;
  /** nftables tables, `<family> <name>` (the nftables backend's own). */
  readonly nftTables: readonly string[];
  readonly timeoutMs: number;
}

const FAMILIES: readonly IpFamily[] = ['ipv4', 'ipv6'];

const inNetns = (netns: string | undefined) => (netns === undefined ? {} : { netns });

/**
 * Reads what `scope` covers in a network namespace (the current one when `netns` is undefined): the filter tables of
 * both families, every ipset (rules of others may match on sets of theirs) and the named nftables tables. Reads only.
 */
export async function readKernel(runner: CommandRunner, netns: string | undefined, scope: ScratchScope): Promise<KernelSnapshot> {
  const where = { ...inNetns(netns), timeoutMs: scope.timeoutMs };
  const iptables: Partial<Record<IpFamily, string>> = {};
  for (const family of FAMILIES.filter(kernelHasFamily)) {
    const { stdout } = await runner.run({ command: iptablesBinary(family, scope.iptablesBackend, 'save'), args: ['-t', 'filter'], ...where });
    iptables[family] = stdout;
  }
  const { stdout: ipset } = await runner.run({ command: 'ipset', args: ['save'], ...where });
  const nft: Record<string, string> = {};
  for (const table of scope.nftTables) {
    // nft answers 1 for a table that is not there: nothing to copy or compare.
    const listed = await runner.run({ command: 'nft', args: ['list', 'table', ...table.split(' ')], ...where, okExitCodes: [1] });
    if (listed.exitCode === 0) nft[table] = listed.stdout;
    else if (!/No such file or directory/.test(listed.stderr)) throw new Error(`nft list table ${table} failed: ${listed.stderr.trim()}`);
  }
  return { iptables, ipset, nft };
}

/**
 * Loads a snapshot of the node into an empty scratch namespace: the sets first (the rules match on them), then the
 * filter tables, then the nftables tables. The kernel itself then parses and prints the copy, so that the before and
 * after the diff compares are spelled by the same tools.
 */
export async function loadScratch(runner: CommandRunner, netns: string, snapshot: KernelSnapshot, scope: ScratchScope): Promise<void> {
  const where = { netns, timeoutMs: scope.timeoutMs };
  if (snapshot.ipset.trim() !== '') await runner.run({ command: 'ipset', args: ['restore'], input: snapshot.ipset, ...where });
  for (const [family, text] of Object.entries(snapshot.iptables) as Array<[IpFamily, string]>) {
    if (!text.includes('*filter')) continue;
    await runner.run({ command: iptablesBinary(family, scope.iptablesBackend, 'restore'), args: [], input: text, ...where });
  }
  for (const text of Object.values(snapshot.nft)) await runner.run({ command: 'nft', args: ['-f', '-'], input: text, ...where });
}
