import { readFile, readdir, stat } from 'node:fs/promises';
import { LAB_PREFIX } from './names.js';
import { deleteNetns, listNetns, netnsPids } from './netns.js';
import { runCommand } from './run-command.js';

const labScripts = ['pod-agent.mjs', 'probe-client.mjs'];

export interface StaleCleanupOptions {
  /** Leave namespaces younger than this alone (a concurrent run's); default 0, everything that matches. */
  olderThanMs?: number;
}

export interface StaleCleanupReport {
  namespaces: string[];
  interfaces: string[];
  killedPids: number[];
  /** What could not be removed; cleanup goes on past each failure. */
  errors: string[];
}

/**
 * Removes what crashed lab runs left behind: network namespaces whose name starts with `prefix` (after killing the
 * processes inside them), lab helper processes of those namespaces, and root-namespace interfaces with the prefix.
 * `prefix` must start with `krt-`; `krt-` alone matches every run on the machine, so pass `krt-<runid>-` or an age.
 */
export async function cleanupStale(prefix: string, options: StaleCleanupOptions = {}): Promise<StaleCleanupReport> {
  if (!prefix.startsWith(LAB_PREFIX)) throw new Error(`cleanupStale only removes lab names, which start with "${LAB_PREFIX}"; got "${prefix}"`);
  const report: StaleCleanupReport = { namespaces: [], interfaces: [], killedPids: [], errors: [] };
  const olderThanMs = options.olderThanMs ?? 0;
  const existing = await listNetns();
  const stale: string[] = [];
  for (const name of existing.filter((netns) => netns.startsWith(prefix))) {
    if (olderThanMs > 0 && !(await isOlderThan(`/run/netns/${name}`, olderThanMs))) continue;
    stale.push(name);
  }
  for (const netns of stale) {
    try {
      for (const pid of await netnsPids(netns)) {
        if (kill(pid)) report.killedPids.push(pid);
      }
      await deleteNetns(netns);
      report.namespaces.push(netns);
    } catch (error) {
      report.errors.push(`${netns}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  // Helpers whose namespace is already gone from /run/netns keep it alive anonymously until they exit.
  const live = new Set((await listNetns()).filter((netns) => !stale.includes(netns)));
  for (const { pid, netns } of await labHelperProcesses(prefix)) {
    if (live.has(netns)) continue;
    if (olderThanMs > 0 && (await processAgeMs(pid)) <= olderThanMs) continue;
    if (kill(pid)) report.killedPids.push(pid);
  }
  if (olderThanMs === 0) {
    for (const name of await rootInterfaces(prefix)) {
      try {
        await runCommand('ip', ['link', 'del', name]);
        report.interfaces.push(name);
      } catch (error) {
        report.errors.push(`${name}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  }
  return report;
}

async function isOlderThan(path: string, ageMs: number): Promise<boolean> {
  try {
    return Date.now() - (await stat(path)).mtimeMs > ageMs;
  } catch {
    return false;
  }
}

async function processAgeMs(pid: number): Promise<number> {
  try {
    return Number.parseInt(await runCommand('ps', ['-o', 'etimes=', '-p', String(pid)]), 10) * 1000;
  } catch {
    return 0;
  }
}

function kill(pid: number): boolean {
  try {
    process.kill(pid, 'SIGKILL');
    return true;
  } catch {
    return false;
  }
}

/** Processes running a lab script for a namespace with the prefix: `node <dir>/pod-agent.mjs <netns> ...`. */
async function labHelperProcesses(prefix: string): Promise<{ pid: number; netns: string }[]> {
  const found: { pid: number; netns: string }[] = [];
  for (const entry of await readdir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    let args: string[];
    try {
      args = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
    } catch {
      continue;
    }
    const scriptIndex = args.findIndex((arg) => labScripts.some((script) => arg.endsWith(`/${script}`)));
    const netns = scriptIndex >= 0 ? args[scriptIndex + 1] : undefined;
    if (netns?.startsWith(prefix)) found.push({ pid, netns });
  }
  return found;
}

async function rootInterfaces(prefix: string): Promise<string[]> {
  const output = await runCommand('ip', ['-o', 'link', 'show']);
  return output
    .split('\n')
    .map((line) => line.split(':')[1]?.trim().split('@')[0] ?? '')
    .filter((name) => name.startsWith(prefix));
}
