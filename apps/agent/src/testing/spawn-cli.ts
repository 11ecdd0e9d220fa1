import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { LogLine } from './support.js';

const agentDir = fileURLToPath(new URL('../..', import.meta.url));

export interface SpawnedCli {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<number | null>;
}

const children: ChildProcess[] = [];

/**
 * Runs a CLI entry (relative to apps/agent) with tsx's loader and the source condition, NODE_NAME=krt-node. Node runs
 * it directly (`node --import tsx`), not through the tsx binary, whose wrapper process relays signals on its own
 * schedule: under load it may kill the agent before the agent's own SIGTERM handler sees the signal.
 */
export function spawnCli(entry: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): SpawnedCli {
  const child = spawn(process.execPath, ['--conditions=@kube-router/source', '--import', 'tsx', entry, ...args], {
    cwd: agentDir,
    env: { ...process.env, NODE_NAME: 'krt-node', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // On 'close', not 'exit': the last lines a CLI writes before it exits may still be in the pipe when it has exited,
  // and a test reads them (the stop's log lines). A grandchild holding the pipe open cannot hold the test up for long.
  const exit = new Promise<number | null>((resolve) => {
    child.once('close', (code) => resolve(code));
    child.once('exit', (code) => setTimeout(() => resolve(code), 2_000).unref());
  });
  return { child, stdout: () => stdout, stderr: () => stderr, exit };
}

/** Kills what spawnCli started and is still running (for afterEach). */
export function killSpawnedClis(): void {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

export const parseLogs = (text: string): LogLine[] =>
  text
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as LogLine);
