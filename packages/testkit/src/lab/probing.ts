import { fileURLToPath } from 'node:url';
import { ipFamily } from './ip-allocator.js';
import type { PodSandbox } from './lab-node.js';
import type { PodRef, ProbeOutcome, ProbeRequest, ProbeResult, WireProbe } from './probe-types.js';
import { unsupportedProtocolReason } from './protocols.js';
import { runCommand } from './run-command.js';

/** Long enough for an answer across a loaded two-core machine, short enough that a dropped probe costs little. */
export const DEFAULT_PROBE_TIMEOUT_MS = 500;

const probeClientScript = fileURLToPath(new URL('./probe-client.mjs', import.meta.url));

export type PodLookup = (ref: PodRef) => PodSandbox;

/** `"ns/name"`, `"name"` (namespace `default`) or `{ namespace, name }` as a store key. */
export function podKey(ref: PodRef): string {
  if (typeof ref !== 'string') return `${ref.namespace ?? 'default'}/${ref.name}`;
  return ref.includes('/') ? ref : `default/${ref}`;
}

interface SourceGroup {
  run(probes: WireProbe[]): Promise<ProbeOutcome[]>;
  probes: WireProbe[];
  indexes: number[];
}

/**
 * Runs probes grouped by their source: one message to each source pod's agent (or one process in a bare netns),
 * every probe of every source at once, so that a whole matrix takes about one probe timeout.
 */
export async function runProbeRequests(
  requests: readonly ProbeRequest[],
  lookupPod: PodLookup,
  defaultTimeoutMs = DEFAULT_PROBE_TIMEOUT_MS,
): Promise<ProbeResult[]> {
  const results: ProbeResult[] = new Array(requests.length);
  const groups = new Map<string, SourceGroup>();
  requests.forEach((request, index) => {
    const protocol = request.protocol ?? 'TCP';
    const target = resolveTarget(request, lookupPod);
    const skipped = unsupportedProtocolReason(protocol);
    if (skipped !== undefined || (protocol !== 'TCP' && protocol !== 'UDP')) {
      results[index] = { request, target, ok: false, ms: 0, skipped: skipped ?? `unknown protocol ${protocol}` };
      return;
    }
    const source = sourceGroup(request, lookupPod, groups);
    source.probes.push({ host: target, port: request.port, protocol, timeoutMs: request.timeoutMs ?? defaultTimeoutMs });
    source.indexes.push(index);
  });
  await Promise.all(
    [...groups.values()].map(async (group) => {
      const outcomes = await group.run(group.probes);
      group.indexes.forEach((requestIndex, probeIndex) => {
        const request = requests[requestIndex] as ProbeRequest;
        const outcome = outcomes[probeIndex] ?? { ok: false, error: 'no outcome', ms: 0 };
        results[requestIndex] = { ...outcome, request, target: group.probes[probeIndex]?.host ?? '' };
      });
    }),
  );
  return results;
}

function sourceGroup(request: ProbeRequest, lookupPod: PodLookup, groups: Map<string, SourceGroup>): SourceGroup {
  const from = request.from;
  if (typeof from === 'object' && 'netns' in from) {
    const key = `netns:${from.netns}`;
    let group = groups.get(key);
    if (!group) {
      group = { run: (probes) => probeFromNetns(from.netns, probes), probes: [], indexes: [] };
      groups.set(key, group);
    }
    return group;
  }
  const sandbox = lookupPod(from);
  const key = `pod:${sandbox.netns}`;
  let group = groups.get(key);
  if (!group) {
    group = { run: (probes) => sandbox.agent.probe(probes), probes: [], indexes: [] };
    groups.set(key, group);
  }
  return group;
}

function resolveTarget(request: ProbeRequest, lookupPod: PodLookup): string {
  const to = request.to;
  if (typeof to === 'string' && ipFamily(to) !== undefined) return to;
  const sandbox = lookupPod(to);
  const address = request.family ? sandbox.ips.find((ip) => ipFamily(ip) === request.family) : sandbox.ips[0];
  if (address === undefined) throw new Error(`pod ${podKey(to)} has no IPv${request.family} address`);
  return address;
}

/** Runs probes from any network namespace with a one-shot client process. */
export async function probeFromNetns(netns: string, probes: readonly WireProbe[]): Promise<ProbeOutcome[]> {
  if (probes.length === 0) return [];
  const longest = Math.max(...probes.map((probe) => probe.timeoutMs));
  const output = await runCommand(
    'ip',
    ['netns', 'exec', netns, process.execPath, probeClientScript, netns, JSON.stringify(probes)],
    { timeoutMs: longest + 10_000 },
  );
  return JSON.parse(output) as ProbeOutcome[];
}
