import { runCommand } from './run-command.js';

export async function addNetns(name: string): Promise<void> {
  await runCommand('ip', ['netns', 'add', name]);
}

/** Deletes a network namespace; one that is already gone is not an error. */
export async function deleteNetns(name: string): Promise<void> {
  try {
    await runCommand('ip', ['netns', 'del', name]);
  } catch (error) {
    if (!(await listNetns()).includes(name)) return;
    throw error;
  }
}

export async function listNetns(): Promise<string[]> {
  const output = await runCommand('ip', ['netns', 'list']);
  // Lines look like "name" or "name (id: 3)".
  return output
    .split('\n')
    .map((line) => line.trim().split(/\s+/)[0] ?? '')
    .filter((name) => name !== '');
}

/** The ids of the processes that live in a network namespace. */
export async function netnsPids(name: string): Promise<number[]> {
  const output = await runCommand('ip', ['netns', 'pids', name]);
  return output
    .split('\n')
    .map((line) => Number.parseInt(line.trim(), 10))
    .filter((pid) => Number.isInteger(pid) && pid > 0);
}

/** Runs `ip` commands inside a namespace in one process: `ip -n <netns> -batch -`. */
export async function ipBatch(netns: string, commands: readonly string[]): Promise<void> {
  if (commands.length === 0) return;
  await runCommand('ip', ['-n', netns, '-batch', '-'], { input: `${commands.join('\n')}\n` });
}

export async function setSysctls(netns: string, values: Readonly<Record<string, string | number>>): Promise<void> {
  const assignments = Object.entries(values).map(([key, value]) => `${key}=${value}`);
  await runCommand('ip', ['netns', 'exec', netns, 'sysctl', '-q', '-w', ...assignments]);
}
