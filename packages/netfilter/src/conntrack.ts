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
  if (!['tcp', 'udp', 'sctp'].includes(filter.protocol)) throw new Error(`conntrack: unsupported protocol ${JSON.stringify(filter.protocol)}`);
  if (filter.family !== 'ipv4' && filter.family !== 'ipv6') throw new Error(`conntrack: unsupported family ${JSON.stringify(filter.family)}`);
  const args = ['-D', '-p', filter.protocol, '-f', filter.family];
  if (filter.originalDestination !== undefined) args.push('--orig-dst', checkedAddress(filter.originalDestination, filter.family, 'originalDestination'));
  if (filter.originalPort !== undefined) args.push('--orig-port-dst', checkedPort(filter.originalPort, 'originalPort'));
  if (filter.replySource !== undefined) args.push('--reply-src', checkedAddress(filter.replySource, filter.family, 'replySource'));
  if (filter.replySourcePort !== undefined) args.push('--reply-port-src', checkedPort(filter.replySourcePort, 'replySourcePort'));
  if (args.length === 5) throw new Error('conntrack: a delete needs an address or port to match, not only a protocol and family');
  return args;
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
