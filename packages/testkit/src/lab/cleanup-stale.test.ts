import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanupStale } from './cleanup-stale.js';
import { newRunId, runPrefix } from './names.js';
import { addNetns, deleteNetns, listNetns } from './netns.js';
import { labSkipReason } from './testing/preconditions.js';
import { waitFor } from '../wait.js';

const skipReason = labSkipReason('sleep', 'ps');

function isAlive(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

describe.skipIf(skipReason !== undefined)(`cleanupStale${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  const crashed = runPrefix(newRunId());
  const other = runPrefix(newRunId());
  const children: ChildProcess[] = [];

  afterAll(async () => {
    for (const child of children) if (isAlive(child)) child.kill('SIGKILL');
    for (const netns of await listNetns()) {
      if (netns.startsWith(crashed) || netns.startsWith(other)) await deleteNetns(netns);
    }
  });

  it('refuses prefixes that are not lab names', async () => {
    await expect(cleanupStale('eth')).rejects.toThrow(/krt-/);
  });

  it('removes the namespaces and processes a crashed run left, and nothing else', async () => {
    await addNetns(`${crashed}node`);
    await addNetns(`${crashed}p1-default-web`);
    await addNetns(`${other}node`);
    // A process still running inside a leftover namespace.
    const sleeper = spawn('ip', ['netns', 'exec', `${crashed}node`, 'sleep', '60'], { stdio: 'ignore' });
    // A pod agent whose namespace was already unlinked: it keeps the namespace alive, anonymously.
    await addNetns(`${crashed}p2-default-gone`);
    const agent = spawn(
      'ip',
      ['netns', 'exec', `${crashed}p2-default-gone`, process.execPath, fileURLToPath(new URL('./pod-agent.mjs', import.meta.url)),
        `${crashed}p2-default-gone`, 'default/gone', JSON.stringify({ identity: 'default/gone', ports: [] })],
      { stdio: ['pipe', 'pipe', 'ignore'] },
    );
    children.push(sleeper, agent);
    await new Promise((resolve) => agent.stdout?.once('data', resolve));
    await deleteNetns(`${crashed}p2-default-gone`);

    const young = await cleanupStale(crashed, { olderThanMs: 60_000 });
    expect(young.namespaces).toEqual([]);
    expect(young.killedPids).toEqual([]);
    expect(isAlive(sleeper) && isAlive(agent)).toBe(true);

    const report = await cleanupStale(crashed);
    expect(report.errors).toEqual([]);
    expect(report.namespaces.sort()).toEqual([`${crashed}node`, `${crashed}p1-default-web`]);
    expect(report.killedPids.sort()).toEqual([sleeper.pid, agent.pid].sort());
    await waitFor('the leftover processes to die', () => !isAlive(sleeper) && !isAlive(agent));
    const left = await listNetns();
    expect(left.filter((netns) => netns.startsWith(crashed))).toEqual([]);
    expect(left).toContain(`${other}node`);
  });
});
