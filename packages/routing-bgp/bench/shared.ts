// What routing-bgp's benches share: the agent's own sync limits, medians, deleting a namespace with what runs in it,
// reading a process's RSS.
import { readFile } from 'node:fs/promises';
import { ExecRunner, killNetnsProcesses, netnsPids } from '@kube-router/netfilter';
import type { RouteSyncOptions } from '@kube-router/route-sync';
import type { RoutingBgpOptions } from '../src/plugin.js';
import { sh } from '../src/testing/mesh.js';

/** routing-bgp with the agent's sync limits (at most one sync a second), not the tests' fast ones. */
export const AGENT_ROUTING_LIMITS: RoutingBgpOptions = { bgpPort: 179, syncPeriodMs: 60_000, minSyncIntervalMs: 1_000 };
/** route-sync with the agent's sync limits. */
export const AGENT_ROUTE_SYNC_LIMITS: Partial<RouteSyncOptions> = { syncPeriodMs: 60_000, minSyncIntervalMs: 1_000 };

const runner = new ExecRunner();

export const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Kills what still runs in a namespace (a daemon that outlived a failure would keep its veth alive), then deletes it. */
export async function deleteNetns(netns: string): Promise<void> {
  await killNetnsProcesses(runner, netns);
  await sh('ip', ['netns', 'delete', netns]).catch(() => undefined);
}

/** The resident set of a process in MiB (VmRSS), or undefined once it is gone. */
export async function rssMiB(pid: number): Promise<number | undefined> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kib = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
  return kib === undefined ? undefined : Number(kib) / 1024;
}

/** The first process in a namespace whose command name is `comm` (gobgpd, bird). */
export async function pidIn(netns: string, comm: string): Promise<number | undefined> {
  for (const pid of await netnsPids(runner, netns)) {
    if ((await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim() === comm) return pid;
  }
  return undefined;
}
