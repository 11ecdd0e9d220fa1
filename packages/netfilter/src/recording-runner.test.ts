import { describe, expect, it } from 'vitest';
import { CommandError } from './command.js';
import { RecordingRunner } from './recording-runner.js';

describe('RecordingRunner', () => {
  it('records every invocation with its input and namespace', async () => {
    const runner = new RecordingRunner();
    await runner.run({
      command: 'ipset',
      args: ['restore', '-exist'],
      input: 'flush a\n',
      netns: 'krt-x',
      timeoutMs: 5,
    });
    await runner.run({ command: 'ip', args: ['-j', 'link', 'show', 'dev', 'my link'] });
    expect(runner.lines()).toEqual(['ipset restore -exist', "ip -j link show dev 'my link'"]);
    expect(runner.invocations[0]).toMatchObject({ input: 'flush a\n', netns: 'krt-x', timeoutMs: 5 });
  });

  it('answers unmatched commands with an empty success, or rejects them when strict', async () => {
    await expect(new RecordingRunner().run({ command: 'nft', args: ['-f', '-'] })).resolves.toMatchObject({
      exitCode: 0,
      stdout: '',
    });
    await expect(new RecordingRunner({ strict: true }).run({ command: 'nft' })).rejects.toThrow(/no scripted response/);
  });

  it('matches by command, by command line prefix and by predicate; later scripts win', async () => {
    const runner = new RecordingRunner()
      .on('ipset', { stdout: 'any ipset' })
      .on('ipset list -n', { stdout: 'krt-a\n' })
      .on((spec) => spec.netns === 'krt-ns', { stdout: 'in netns' });
    expect((await runner.run({ command: 'ipset', args: ['save'] })).stdout).toBe('any ipset');
    expect((await runner.run({ command: 'ipset', args: ['list', '-n'] })).stdout).toBe('krt-a\n');
    expect((await runner.run({ command: 'ipset', args: ['list', '-name'] })).stdout).toBe('any ipset');
    expect((await runner.run({ command: 'ipset', args: ['list', '-n'], netns: 'krt-ns' })).stdout).toBe('in netns');
  });

  it('uses once scripts in the order they were added, before the persistent ones', async () => {
    const runner = new RecordingRunner()
      .once('nft', { stdout: 'first' })
      .on('nft', { stdout: 'always' })
      .once('nft', { stdout: 'second' });
    expect((await runner.run({ command: 'nft' })).stdout).toBe('first');
    expect((await runner.run({ command: 'nft' })).stdout).toBe('second');
    expect((await runner.run({ command: 'nft' })).stdout).toBe('always');
  });

  it('fails like the real runner for a non-zero exit, unless the code is an answer', async () => {
    const runner = new RecordingRunner().on('iptables', { exitCode: 1, stderr: 'Bad rule' });
    const error = await runner.run({ command: 'iptables', args: ['-C', 'X'] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CommandError);
    expect(error).toMatchObject({ exitCode: 1, stderr: 'Bad rule', args: ['-C', 'X'] });
    expect((await runner.run({ command: 'iptables', okExitCodes: [1] })).exitCode).toBe(1);
  });

  it('scripts a timeout', async () => {
    const runner = new RecordingRunner().on('sleep', { timedOut: true });
    const error = (await runner
      .run({ command: 'sleep', args: ['9'], timeoutMs: 200 })
      .catch((e: unknown) => e)) as CommandError;
    expect(error.timedOut).toBe(true);
    expect(error.message).toContain('timed out after 200ms');
  });

  it('computes answers from the invocation', async () => {
    const runner = new RecordingRunner().on('cat', (spec) => ({ stdout: spec.input ?? '' }));
    expect((await runner.run({ command: 'cat', input: 'echo' })).stdout).toBe('echo');
  });
});
