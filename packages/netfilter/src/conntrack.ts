import { isIPv4, isIPv6 } from 'node:net';
import { CommandError } from './command.js';
import type { CommandRunner } from './command.js';
import type { IpFamily } from './family.js';

export type ConntrackProtocol = 'tcp' | 'udp' | 'sctp';

/**
 * Which connection tracking entries to delete. Every field given narrows the match; `protocol` and `family` are always
 * given, so a filter never reaches every entry of the table.
 */
export interface ConntrackFilter {
  readonly protocol: ConntrackProtocol;
  readonly family: IpFamily;
  /** The address the client sent to (a Service VIP, a node address): `--orig-dst`. */
  readonly originalDestination?: string;
  /** The port the client sent to: `--orig-port-dst`. */
  readonly originalPort?: number;
  /** Where replies come from after NAT, the endpoint the flow was sent to: `--reply-src`. */
  readonly replySource?: string;
  /** The endpoint's port: `--reply-port-src`. */
  readonly replySourcePort?: number;
}

export interface ConntrackOptions {
  /** Runs conntrack inside this network namespace. */
  readonly netns?: string;
  readonly timeoutMs?: number;
  /** The conntrack binary. */
  readonly command?: string;
}

export interface ConntrackDeleteResult {
  /** How many entries the kernel deleted, as conntrack counts them. */
  readonly deleted: number;
}

const DEFAULT_CONNTRACK_TIMEOUT_MS = 10_000;

/** conntrack's closing line on stderr: `conntrack v1.4.7 (conntrack-tools): 3 flow entries have been deleted.` */
const DELETED_COUNT = /(\d+) flow entr(?:y|ies) ha(?:s|ve) been deleted/;

/**
 * The arguments of `conntrack -D` for a filter. Exported for unit tests and for callers that show what they run.
 * Addresses and ports are checked here: a filter that would match more than it says is refused, not run.
 */
export function conntrackDeleteArgs(filter: ConntrackFilter): string[] {
  const args = filterArgs('-D', filter);
  if (filter.originalDestination !== undefined) args.push('--orig-dst', checkedAddress(filter.originalDestination, filter.family, 'originalDestination'));
  if (filter.originalPort !== undefined) args.push('--orig-port-dst', checkedPort(filter.originalPort, 'originalPort'));
  if (filter.replySource !== undefined) args.push('--reply-src', checkedAddress(filter.replySource, filter.family, 'replySource'));
  if (filter.replySourcePort !== undefined) args.push('--reply-port-src', checkedPort(filter.replySourcePort, 'replySourcePort'));
  if (args.length === 5) throw new Error('conntrack: a delete needs an address or port to match, not only a protocol and family');
  return args;
}

function filterArgs(operation: '-D' | '-L', filter: Pick<ConntrackFilter, 'protocol' | 'family'>): string[] {
  if (!['tcp', 'udp', 'sctp'].includes(filter.protocol)) throw new Error(`conntrack: unsupported protocol ${JSON.stringify(filter.protocol)}`);
  if (filter.family !== 'ipv4' && filter.family !== 'ipv6') throw new Error(`conntrack: unsupported family ${JSON.stringify(filter.family)}`);
  return [operation, '-p', filter.protocol, '-f', filter.family];
}

/** One side of a tracked flow: the tuple as the client sent it (`original`) or as the reply comes back (`reply`). */
export interface ConntrackTuple {
  readonly source: string;
  readonly destination: string;
  readonly sourcePort: number;
  readonly destinationPort: number;
}

/** A tracked flow. After DNAT, `reply.source` is the endpoint the flow was sent to. */
export interface ConntrackEntry {
  readonly protocol: ConntrackProtocol;
  /** The TCP or SCTP state (`ESTABLISHED`, `TIME_WAIT`, ...); `UDP` for UDP, which has none. */
  readonly state: string;
  readonly original: ConntrackTuple;
  readonly reply: ConntrackTuple;
}

/**
 * Parses `conntrack -L` lines (`tcp 6 431999 ESTABLISHED src=... dst=... sport=... dport=... src=... [ASSURED] ...`):
 * the first src/dst/sport/dport are the original direction, the second the reply. Lines of other protocols, or without
 * both tuples, are left out.
 */
export function parseConntrackList(text: string): ConntrackEntry[] {
  const entries: ConntrackEntry[] = [];
  for (const line of text.split('\n')) {
    const words = line.trim().split(/\s+/);
    const protocol = words[0] as ConntrackProtocol;
    if (!['tcp', 'udp', 'sctp'].includes(protocol)) continue;
    const fields: Record<string, string>[] = [];
    for (const word of words) {
      const match = /^(src|dst|sport|dport)=(.+)$/.exec(word);
      if (!match) continue;
      const [, key, value] = match as unknown as [string, string, string];
      if (fields.length === 0 || key in (fields.at(-1) as Record<string, string>)) fields.push({});
      (fields.at(-1) as Record<string, string>)[key] = value;
    }
    const [original, reply] = fields.map(tupleOf);
    if (!original || !reply) continue;
    // The state follows protocol name, number and timeout; UDP has none, and the tuple starts there.
    const state = protocol === 'udp' || words[3]?.includes('=') ? 'UDP' : (words[3] ?? '');
    entries.push({ protocol, state, original, reply });
  }
  return entries;
}

function tupleOf(fields: Record<string, string>): ConntrackTuple | undefined {
  const { src, dst, sport, dport } = fields;
  if (src === undefined || dst === undefined || sport === undefined || dport === undefined) return undefined;
  return { source: src, destination: dst, sourcePort: Number(sport), destinationPort: Number(dport) };
}

/**
 * The tracked flows to an address and port (`conntrack -L --orig-dst --orig-port-dst`), e.g. a Service's: where each
 * client's connection went after DNAT. Reads only. An empty table is an empty list.
 */
export async function listConntrackEntries(
  runner: CommandRunner,
  filter: Pick<ConntrackFilter, 'protocol' | 'family'> & { readonly originalDestination: string; readonly originalPort: number },
  options: ConntrackOptions = {},
): Promise<ConntrackEntry[]> {
  const args = [
    ...filterArgs('-L', filter),
    '--orig-dst',
    checkedAddress(filter.originalDestination, filter.family, 'originalDestination'),
    '--orig-port-dst',
    checkedPort(filter.originalPort, 'originalPort'),
  ];
  const result = await runner.run({
    command: options.command ?? 'conntrack',
    args,
    timeoutMs: options.timeoutMs ?? DEFAULT_CONNTRACK_TIMEOUT_MS,
    ...(options.netns !== undefined && { netns: options.netns }),
  });
  return parseConntrackList(result.stdout);
}

/**
 * Deletes the connection tracking entries that match `filter` with `conntrack -D`, through `runner` (its timeout,
 * stderr in the error). Finding nothing to delete is an answer, not a failure: conntrack exits 1 then, saying
 * "0 flow entries have been deleted".
 *
 * Why a proxy needs it: a UDP client that keeps sending to a Service (DNS above all) refreshes an entry that still
 * points at an endpoint that has gone, or at nothing when the Service had no endpoints, and never reaches a new one
 * until the entry expires (kube-proxy deletes them for the same reason).
 */
export async function deleteConntrackEntries(runner: CommandRunner, filter: ConntrackFilter, options: ConntrackOptions = {}): Promise<ConntrackDeleteResult> {
  const args = conntrackDeleteArgs(filter);
  const command = options.command ?? 'conntrack';
  const result = await runner.run({
    command,
    args,
    timeoutMs: options.timeoutMs ?? DEFAULT_CONNTRACK_TIMEOUT_MS,
    ...(options.netns !== undefined && { netns: options.netns }),
    okExitCodes: [1],
  });
  const count = DELETED_COUNT.exec(result.stderr);
  if (result.exitCode === 0) return { deleted: count ? Number(count[1]) : 0 };
  if (count && Number(count[1]) === 0) return { deleted: 0 };
  // Exit 1 for anything else (no conntrack in the kernel, a bad argument) is a failure with conntrack's own words.
  throw new CommandError({
    command,
    args,
    exitCode: result.exitCode,
    stderr: result.stderr,
    stdout: result.stdout,
    ...(options.netns !== undefined && { netns: options.netns }),
  });
}

function checkedAddress(address: string, family: IpFamily, field: string): string {
  if (!(family === 'ipv4' ? isIPv4(address) : isIPv6(address))) throw new Error(`conntrack: ${field} ${JSON.stringify(address)} is not an ${family} address`);
  return address;
}

function checkedPort(port: number, field: string): string {
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`conntrack: ${field} ${JSON.stringify(port)} is not a port (1-65535)`);
  return String(port);
}
