import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CommandError, FailFastSession } from './command.js';
import { CommandRegistry, ExecRunner } from './exec-runner.js';
import { RecordingRunner } from './recording-runner.js';
import { processAlive } from './testing/processes.js';

/** The CommandError a run fails with; a run that succeeds fails the test. */
async function failureOf(run: Promise<unknown>): Promise<CommandError> {
  const outcome = await run.then(
    () => new Error('the command succeeded'),
    (error: unknown) => error,
  );
  if (!(outcome instanceof CommandError)) throw outcome;
  return outcome;
}

async function diesWithin(pid: number, ms: number): Promise<boolean> {
  const deadline = performance.now() + ms;
  while (performance.now() < deadline) {
    if (!(await processAlive(pid))) return true;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return false;
}

async function waitForFile(path: string): Promise<string> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const text = await readFile(path, 'utf8').catch(() => '');
    if (text.trim() !== '') return text;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`${path} never appeared`);
}

describe('CommandRegistry', () => {
  let directory = '';
  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'tagd-registry-'));
  });
  afterAll(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('kills every running command with its process group at once, and refuses new ones until resumed', async () => {
    const registry = new CommandRegistry();
    const runner = new ExecRunner({ registry, defaultTimeoutMs: 30_000 });
    const pidFile = join(directory, 'pids');
    const hung = [1, 2].map(() => failureOf(runner.run({ command: 'sh', args: ['-c', `sleep 600 & echo "$$ $!" >> ${pidFile}; wait`] })));
    await waitForFile(pidFile);
    while (registry.size < 2 || (await readFile(pidFile, 'utf8')).trim().split('\n').length < 2) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const pids = (await readFile(pidFile, 'utf8')).trim().split(/\s+/).map(Number);

    const started = performance.now();
    expect(registry.halt('the agent is stopping')).toBe(2);
    const errors = await Promise.all(hung);
    expect(performance.now() - started).toBeLessThan(1_000);
    for (const error of errors) {
      expect(error).toBeInstanceOf(CommandError);
      expect(error.message).toMatch(/^sh -c .* was killed by SIGKILL; killed: the agent is stopping$/);
    }
    // SIGKILL reaches the whole group at once; the kernel takes a moment to end each process.
    for (const pid of pids) expect(await diesWithin(pid, 1_000), `pid ${pid}`).toBe(true);
    expect(registry.size).toBe(0);

    const refused = await failureOf(runner.run({ command: 'true' }));
    expect(refused.message).toBe('true was not run: the agent is stopping');
    registry.resume();
    await expect(runner.run({ command: 'true' })).resolves.toMatchObject({ exitCode: 0 });
  });

  it('forgets commands that ended', async () => {
    const registry = new CommandRegistry();
    const runner = new ExecRunner({ registry });
    await runner.run({ command: 'true' });
    await runner.run({ command: 'false' }).catch(() => undefined);
    await runner.run({ command: 'no-such-tool-tagd' }).catch(() => undefined);
    expect(registry.size).toBe(0);
    expect(registry.halt('nothing to kill')).toBe(0);
  });
});

describe('FailFastSession', () => {
  it('fails every later command at once after one timed out, naming it, until the next sync begins', async () => {
    const session = new FailFastSession(new ExecRunner());
    const started = performance.now();
    const timedOut = await failureOf(session.run({ command: 'sleep', args: ['10'], timeoutMs: 300 }));
    expect(timedOut.timedOut).toBe(true);
    const skipped = await Promise.all(
      [1, 2, 3].map(() => failureOf(session.run({ command: 'sleep', args: ['10'], timeoutMs: 300 }))),
    );
    // One timeout in all, not one per command.
    expect(performance.now() - started).toBeLessThan(1_500);
    for (const error of skipped) {
      expect(error).toBeInstanceOf(CommandError);
      expect(error.message).toBe('sleep 10 was not run: sleep 10 timed out after 300ms earlier in this sync');
    }
    expect(session.timedOut).toBe(timedOut);
    session.begin();
    await expect(session.run({ command: 'true' })).resolves.toMatchObject({ exitCode: 0 });
  });

  it('fails every later command at once after one found the xtables lock held past its wait, naming it', async () => {
    const inner = new RecordingRunner().once('iptables-legacy-restore', {
      exitCode: 4,
      stderr: "Can't lock /run/xtables.lock: Resource temporarily unavailable\nAnother app is currently holding the xtables lock. Stopped waiting after 5s.\n",
    });
    const session = new FailFastSession(inner);
    const held = await failureOf(session.run({ command: 'iptables-legacy-restore', args: ['--noflush', '--wait=5'] }));
    expect(held.message).toMatch(/holding the xtables lock/);
    // Each of these would otherwise wait out its own 5 s for the same lock, and apply once it is free: a later family
    // written after an earlier one failed.
    const skipped = await failureOf(session.run({ command: 'ip6tables-legacy-restore', args: ['--noflush', '--wait=5'] }));
    expect(skipped.message).toBe(
      'ip6tables-legacy-restore --noflush --wait=5 was not run: iptables-legacy-restore --noflush --wait=5 found the xtables lock held by another process earlier in this sync',
    );
    expect(inner.lines()).toEqual(['iptables-legacy-restore --noflush --wait=5']);
    expect(session.stoppedBy).toBe(held);
    expect(session.timedOut).toBeUndefined();
    session.begin();
    await expect(session.run({ command: 'ip6tables-legacy-restore' })).resolves.toMatchObject({ exitCode: 0 });
  });

  it('keeps running after failures that are not timeouts', async () => {
    const inner = new RecordingRunner().once('iptables-restore', { exitCode: 2, stderr: 'bad rule' });
    const session = new FailFastSession(inner);
    await expect(session.run({ command: 'iptables-restore' })).rejects.toThrow(/exited with code 2/);
    await expect(session.run({ command: 'ipset', args: ['list', '-n'] })).resolves.toMatchObject({ exitCode: 0 });
    expect(session.timedOut).toBeUndefined();
  });
});
