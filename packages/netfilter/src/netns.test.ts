import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { ExecRunner } from './exec-runner.js';
import { hasTool } from './executables.js';
import { addNetns, deleteNetns, killNetnsProcesses, netnsPids } from './netns.js';

const runner = new ExecRunner();
const missing = process.getuid?.() !== 0 ? 'root' : hasTool('ip') ? undefined : 'ip';

describe.skipIf(missing !== undefined)(`what runs in a network namespace${missing ? ` (skipped: needs ${missing})` : ''}`, () => {
  const name = `nfkill-${randomBytes(3).toString('hex')}`;
  afterAll(() => deleteNetns(runner, name).catch(() => undefined));

  it('lists the processes in a namespace and kills them, which deleting the namespace would not', async () => {
    await addNetns(runner, name);
    // As a daemon would: its own process group, nothing of this process's waits for it.
    const sleeper = spawn('ip', ['netns', 'exec', name, 'sleep', '600'], { detached: true, stdio: 'ignore' });
    const exited = new Promise((resolve) => sleeper.once('exit', (_code, signal) => resolve(signal)));
    let pids: number[] = [];
    for (let attempt = 0; attempt < 100 && pids.length === 0; attempt++) {
      pids = await netnsPids(runner, name);
      if (pids.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(pids).toContain(sleeper.pid);
    await killNetnsProcesses(runner, name);
    expect(await exited).toBe('SIGKILL');
    expect(await netnsPids(runner, name)).toEqual([]);
  });

  it('finds no process in a namespace that does not exist', async () => {
    expect(await netnsPids(runner, `${name}-gone`)).toEqual([]);
  });
});
