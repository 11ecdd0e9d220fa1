import { readdirSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CommandError } from './command.js';
import { ExecRunner } from './exec-runner.js';
import type { LaunchEnd, Launcher } from './launcher.js';
import { missingForRealTests, useTestNetns } from './testing/netns.js';
import { processAlive } from './testing/processes.js';

const runner = new ExecRunner({ defaultTimeoutMs: 5_000 });

describe('ExecRunner', () => {
  it('returns stdout, stderr and the exit code', async () => {
    const result = await runner.run({ command: 'sh', args: ['-c', 'echo out; echo err >&2'] });
    expect(result).toMatchObject({ stdout: 'out\n', stderr: 'err\n', exitCode: 0 });
    expect(result.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('writes input to stdin', async () => {
    const input = 'line one\nline two\n'.repeat(20_000);
    const result = await runner.run({ command: 'cat', input });
    expect(result.stdout).toBe(input);
  });

  it('hands a large input over as a file, which the tool reads whatever the event loop does, and leaves no file', async () => {
    const stdinKind = (input: string) => runner.run({ command: 'sh', args: ['-c', 'stat -L -c %F /dev/stdin; wc -c'], input });
    const small = await stdinKind('x'.repeat(1000));
    expect(small.stdout).toBe('socket\n1000\n');
    const large = 'é'.repeat(40_000);
    const before = readdirSync(tmpdir()).filter((name) => name.startsWith('kube-router-input-'));
    const result = await stdinKind(large);
    expect(result.stdout).toBe(`regular file\n${Buffer.byteLength(large)}\n`);
    expect(readdirSync(tmpdir()).filter((name) => name.startsWith('kube-router-input-'))).toEqual(before);
  });

  it('gives a tool without input an empty stdin instead of letting it wait forever', async () => {
    const result = await runner.run({ command: 'cat', timeoutMs: 2_000 });
    expect(result.stdout).toBe('');
  });

  it('fails with a CommandError that carries command, args, exit code and stderr', async () => {
    const error = await runner
      .run({ command: 'sh', args: ['-c', 'echo partial; echo "chain KRT-X does not exist" >&2; exit 3'] })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CommandError);
    const failure = error as CommandError;
    expect(failure).toMatchObject({ command: 'sh', exitCode: 3, timedOut: false, stdout: 'partial\n' });
    expect(failure.args).toEqual(['-c', 'echo partial; echo "chain KRT-X does not exist" >&2; exit 3']);
    expect(failure.stderr).toBe('chain KRT-X does not exist\n');
    expect(failure.message).toContain('exited with code 3');
    expect(failure.message).toContain('stderr: chain KRT-X does not exist');
  });

  it('accepts exit codes listed as answers', async () => {
    const result = await runner.run({ command: 'sh', args: ['-c', 'exit 1'], okExitCodes: [1] });
    expect(result.exitCode).toBe(1);
  });

  it('kills a command that outlives its timeout and says so', async () => {
    const started = performance.now();
    const error = await runner.run({ command: 'sleep', args: ['10'], timeoutMs: 200 }).catch((e: unknown) => e);
    const elapsed = performance.now() - started;
    expect(error).toBeInstanceOf(CommandError);
    expect((error as CommandError).timedOut).toBe(true);
    expect((error as CommandError).message).toMatch(/^sleep 10 timed out after 200ms and was killed/);
    expect(elapsed).toBeLessThan(2_000);
  });

  describe('with a temporary directory', () => {
    let directory = '';
    beforeAll(async () => {
      directory = await mkdtemp(join(tmpdir(), 'krt-exec-'));
    });
    afterAll(async () => {
      await rm(directory, { recursive: true, force: true });
    });

    it('kills what the timed-out command started too', async () => {
      const pidFile = join(directory, 'grandchild.pid');
      const script = `sleep 30 & echo $! > ${pidFile}; wait`;
      await expect(runner.run({ command: 'sh', args: ['-c', script], timeoutMs: 300 })).rejects.toThrow(/timed out/);
      const grandchild = Number((await readFile(pidFile, 'utf8')).trim());
      expect(grandchild).toBeGreaterThan(0);
      await expect.poll(() => processAlive(grandchild), { timeout: 2_000 }).toBe(false);
    });

    it('times out even when a descendant that left the process group keeps stdout open', async () => {
      const pidFile = join(directory, 'escaped.pid');
      const script = `setsid sh -c 'echo $$ > ${pidFile}; exec sleep 30' & wait`;
      const started = performance.now();
      try {
        await expect(runner.run({ command: 'sh', args: ['-c', script], timeoutMs: 300 })).rejects.toThrow(/timed out/);
        expect(performance.now() - started).toBeLessThan(3_000);
      } finally {
        const escaped = Number((await readFile(pidFile, 'utf8').catch(() => '')).trim());
        if (escaped > 0) process.kill(escaped, 'SIGKILL');
      }
    });
  });

  it('reports a command that cannot start', async () => {
    const error = await runner.run({ command: 'krt-no-such-tool', args: ['x'] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CommandError);
    expect((error as CommandError).exitCode).toBeNull();
    expect((error as CommandError).message).toMatch(/^krt-no-such-tool x could not start: .*ENOENT/);
  });

  it('reports a command that Node refuses to spawn as a CommandError and closes the large input it had opened', async () => {
    const inputFiles = () => readdirSync(tmpdir()).filter((name) => name.startsWith('kube-router-input-'));
    const filesBefore = inputFiles();
    // In-process, the input file is opened here: its descriptor must not stay open.
    const inProcess = new ExecRunner({ spawnFrom: 'in-process' });
    const openFds = () => readdirSync('/proc/self/fd').length;
    const before = openFds();
    // A NUL byte in the command makes spawn() throw at once, after the input file was opened for it.
    const error = await inProcess.run({ command: 'c\0t', input: 'x'.repeat(100_000) }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CommandError);
    expect((error as CommandError).exitCode).toBeNull();
    expect((error as CommandError).message).toMatch(/could not start/);
    expect(openFds()).toBe(before);
    // Through the helper, which opens it there: the same error, and no file left behind.
    const fromHelper = await runner.run({ command: 'c\0t', input: 'x'.repeat(100_000) }).catch((e: unknown) => e);
    expect((fromHelper as CommandError).message).toMatch(/could not start/);
    expect(inputFiles()).toEqual(filesBefore);
  });

  it('does not call a command timed out that had ended when its deadline came (its output still on the way)', async () => {
    // A launcher whose command has ended (kill finds nothing to kill) and whose end arrives after the deadline.
    let finish: (end: LaunchEnd) => void = () => undefined;
    const launcher: Launcher = {
      launch: () => ({ ended: new Promise<LaunchEnd>((resolve) => (finish = resolve)), kill: () => false }),
    };
    const running = new ExecRunner({ launcher }).run({ command: 'nft', args: ['-j', 'list', 'ruleset'], timeoutMs: 20 });
    await new Promise((resolve) => setTimeout(resolve, 60));
    finish({ code: 0, signal: null, stdout: '{}', stderr: '', durationMs: 5 });
    await expect(running).resolves.toMatchObject({ stdout: '{}', exitCode: 0, durationMs: 5 });
  });

  it('quotes arguments with spaces in the message', async () => {
    const error = await runner.run({ command: 'sh', args: ['-c', 'exit 2'] }).catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/^sh -c 'exit 2' exited with code 2/);
  });
});

const missing = missingForRealTests();
describe.skipIf(missing !== undefined)(
  `ExecRunner in a network namespace ${missing ? `(skipped: ${missing})` : ''}`,
  () => {
    const netns = useTestNetns();

    it('runs the command inside the namespace', async () => {
      const inside = await runner.run({ command: 'ip', args: ['-j', 'link', 'show'], netns: netns.name });
      const links = (JSON.parse(inside.stdout) as { ifname: string }[]).map((link) => link.ifname);
      expect(links).toEqual(['lo']);
    });

    it('names the namespace in errors', async () => {
      const error = await runner
        .run({ command: 'sh', args: ['-c', 'echo nope >&2; exit 4'], netns: netns.name })
        .catch((e: unknown) => e);
      expect((error as CommandError).netns).toBe(netns.name);
      expect((error as CommandError).message).toContain(`(netns ${netns.name}) exited with code 4; stderr: nope`);
    });

    it('kills a hanging command inside the namespace', async () => {
      const error = await runner
        .run({ command: 'sleep', args: ['10'], netns: netns.name, timeoutMs: 200 })
        .catch((e: unknown) => e);
      expect((error as CommandError).timedOut).toBe(true);
    });
  },
);
