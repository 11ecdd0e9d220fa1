import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CommandError } from './command.js';
import { CommandRegistry, ExecRunner } from './exec-runner.js';
import { HelperLauncher } from './launcher.js';
import { processAlive } from './testing/processes.js';

/** The pid of the process that spawned the command: the helper, or this process. */
async function spawnerOf(runner: ExecRunner): Promise<number> {
  return Number((await runner.run({ command: 'sh', args: ['-c', 'echo $PPID'] })).stdout.trim());
}

/** The pids a command wrote to a file, one a line, once there are `count` of them (vitest's poll bounds the wait). */
async function waitForLines(path: string, count: number): Promise<number[]> {
  let pids: number[] = [];
  const read = async () => (pids = (await readFile(path, 'utf8').catch(() => '')).trim().split('\n').filter(Boolean).map(Number)).length;
  await expect.poll(read, { timeout: 10_000 }).toBeGreaterThanOrEqual(count);
  return pids;
}

describe('ExecRunner spawning', () => {
  let directory = '';
  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'krt-launcher-'));
  });
  afterAll(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('spawns from a helper process by default, and from this process when told to', async () => {
    const helper = await spawnerOf(new ExecRunner());
    expect(helper).not.toBe(process.pid);
    expect(await readFile(`/proc/${helper}/cmdline`, 'utf8')).toContain('-e');
    // One helper for every runner of the process.
    expect(await spawnerOf(new ExecRunner())).toBe(helper);
    expect(await spawnerOf(new ExecRunner({ spawnFrom: 'in-process' }))).toBe(process.pid);
  });

  it('keeps the event loop free while commands start, however large this process is', async () => {
    // Each spawn copies the spawning process's page tables: from a process of a few hundred MiB, milliseconds.
    const ballast = Array.from({ length: 2_000_000 }, (_, index) => ({ index, text: `object ${index}` }));
    const blockedFor = async (runner: ExecRunner) => {
      await runner.run({ command: 'true' });
      const blocked: number[] = [];
      for (let i = 0; i < 11; i++) {
        const started = performance.now();
        const result = runner.run({ command: 'true', input: 'x'.repeat(200_000) });
        blocked.push(performance.now() - started);
        await result;
      }
      // The least of eleven: what starting a command costs the loop itself. Other work on the machine (CI runs two
      // suites at once) only adds to it, and once made the helper's median 5 ms against the in-process 10.
      return Math.min(...blocked);
    };
    const fromHelper = await blockedFor(new ExecRunner());
    const inProcess = await blockedFor(new ExecRunner({ spawnFrom: 'in-process' }));
    expect(ballast.length).toBe(2_000_000);
    expect(fromHelper).toBeLessThan(inProcess / 2);
  });

  it('kills and fails the commands of a helper that died, saying so, and starts a new helper for the next command', async () => {
    const runner = new ExecRunner({ launcher: new HelperLauncher() });
    const first = await spawnerOf(runner);
    const pidFile = join(directory, 'orphan.pid');
    const running = runner.run({ command: 'sh', args: ['-c', `echo $$ > ${pidFile}; exec sleep 30`], timeoutMs: 20_000 }).catch((e: unknown) => e);
    const [sleeper] = (await waitForLines(pidFile, 1)) as [number];
    try {
      process.kill(first, 'SIGKILL');
      const error = await running;
      expect(error).toBeInstanceOf(CommandError);
      expect((error as CommandError).message).toMatch(/was killed by SIGKILL; killed: the command helper exited \(SIGKILL\)/);
      // Left running, it would have no deadline any more, and whatever lock it held would stay held.
      await expect.poll(() => processAlive(sleeper), { timeout: 2_000 }).toBe(false);
      const second = await spawnerOf(runner);
      expect(second).not.toBe(first);
      expect(second).not.toBe(process.pid);
    } finally {
      if (await processAlive(sleeper)) process.kill(sleeper, 'SIGKILL');
    }
  });

  it("reports the command's own duration, not the helper's start, and brings a large output back whole", async () => {
    const started = performance.now();
    // The helper starts with the runner; the first command waits for it.
    const runner = new ExecRunner({ launcher: new HelperLauncher() });
    const first = await runner.run({ command: 'sleep', args: ['0.05'] });
    const wallMs = performance.now() - started;
    // From the spawn, which the 50 ms of sleep follow (a loaded helper may return from spawn() late into them).
    expect(first.durationMs).toBeGreaterThan(10);
    // Node takes tens of milliseconds to start the helper: not the command's time.
    expect(first.durationMs).toBeLessThan(wallMs - 15);
    const before = readdirSync(tmpdir()).filter((name) => name.startsWith('kube-router-output-'));
    // 3 MiB on stdout: through a file the helper writes and this process reads and removes.
    const large = await runner.run({ command: 'sh', args: ['-c', 'head -c 3145728 /dev/zero | tr "\\0" a'] });
    expect(large.stdout).toHaveLength(3 * 1024 * 1024);
    expect(large.stdout).toMatch(/^a+$/);
    expect(readdirSync(tmpdir()).filter((name) => name.startsWith('kube-router-output-'))).toEqual(before);
  });

  it('runs commands in-process when the helper cannot start or goes before it is ready, and never runs a killed one', async () => {
    for (const nodePath of ['/nonexistent/node', 'true']) {
      const registry = new CommandRegistry();
      const runner = new ExecRunner({ launcher: new HelperLauncher({ nodePath }), registry });
      // Killed (the agent stopping) while it waits for the helper: when the helper fails, it is not run at all.
      const pidFile = join(directory, `killed-${nodePath.length}.pid`);
      const killed = runner.run({ command: 'sh', args: ['-c', `echo $$ > ${pidFile}; sleep 2`] }).catch((e: unknown) => e);
      registry.halt('the agent is stopping');
      registry.resume();
      const error = await killed;
      expect(error).toBeInstanceOf(CommandError);
      expect((error as CommandError).message).toContain('killed: the agent is stopping');
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await readFile(pidFile, 'utf8').catch(() => 'never started')).toBe('never started');
      // The next ones run in-process, and succeed.
      expect(await spawnerOf(runner)).toBe(process.pid);
    }
  });

  it('goes, ending what it runs, when the process it serves dies', async () => {
    const pidFile = join(directory, 'served.pids');
    const source = fileURLToPath(new URL('./exec-runner.ts', import.meta.url));
    const script = `
      const { ExecRunner } = await import(${JSON.stringify(source)});
      new ExecRunner().run({ command: 'sh', args: ['-c', 'echo $PPID > ${pidFile}; echo $$ >> ${pidFile}; exec sleep 30'] });
      setInterval(() => {}, 1000);
    `;
    const served = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: 'ignore' });
    try {
      const [helper, command] = (await waitForLines(pidFile, 2)) as [number, number];
      expect(helper).not.toBe(served.pid);
      served.kill('SIGKILL');
      await expect.poll(() => processAlive(helper), { timeout: 5_000 }).toBe(false);
      await expect.poll(() => processAlive(command), { timeout: 5_000 }).toBe(false);
    } finally {
      served.kill('SIGKILL');
    }
  });
});
