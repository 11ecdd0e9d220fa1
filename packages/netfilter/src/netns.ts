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
