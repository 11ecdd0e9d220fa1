import type { CommandRunner } from './command.js';

const NETNS_TIMEOUT_MS = 10_000;

/** Names that `ip netns` accepts: they become files under /run/netns. */
function assertNetnsName(name: string): void {
  if (!/^[A-Za-z0-9_.-]+$/.test(name) || name === '.' || name === '..') {
    throw new RangeError(`invalid network namespace name ${JSON.stringify(name)}`);
  }
}

export async function addNetns(runner: CommandRunner, name: string): Promise<void> {
  assertNetnsName(name);
  await runner.run({ command: 'ip', args: ['netns', 'add', name], timeoutMs: NETNS_TIMEOUT_MS });
}

export async function deleteNetns(runner: CommandRunner, name: string): Promise<void> {
  assertNetnsName(name);
  await runner.run({ command: 'ip', args: ['netns', 'delete', name], timeoutMs: NETNS_TIMEOUT_MS });
}

export async function listNetns(runner: CommandRunner): Promise<string[]> {
  const { stdout } = await runner.run({ command: 'ip', args: ['-j', 'netns', 'list'], timeoutMs: NETNS_TIMEOUT_MS });
  const trimmed = stdout.trim();
  if (trimmed === '') return [];
  return (JSON.parse(trimmed) as { name: string }[]).map((entry) => entry.name);
}

/** The ids of the processes that live in a network namespace; none for a namespace that is gone. */
export async function netnsPids(runner: CommandRunner, name: string): Promise<number[]> {
  assertNetnsName(name);
  const { stdout } = await runner
    .run({ command: 'ip', args: ['netns', 'pids', name], timeoutMs: NETNS_TIMEOUT_MS })
    .catch(() => ({ stdout: '' }));
  return stdout
    .split('\n')
    .map((line) => Number.parseInt(line.trim(), 10))
    .filter((pid) => Number.isInteger(pid) && pid > 0);
}

/**
 * SIGKILLs every process in a namespace. Deleting a namespace kills nothing: a daemon left in it (a gobgpd that
 * outlived its agent, in its own process group) keeps running and keeps the namespace's links alive.
 */
export async function killNetnsProcesses(runner: CommandRunner, name: string): Promise<void> {
  for (const pid of await netnsPids(runner, name)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
}
