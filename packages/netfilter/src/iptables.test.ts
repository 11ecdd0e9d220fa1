import { describe, expect, it } from 'vitest';
import { CommandError } from './command.js';
import { Iptables } from './iptables.js';
import { RecordingRunner } from './recording-runner.js';

describe('Iptables with a recording runner', () => {
  it('picks the binary of family and backend', () => {
    const runner = new RecordingRunner();
    expect(new Iptables({ runner }).binary('restore')).toBe('iptables-restore');
    expect(new Iptables({ runner, family: 'ipv6' }).binary('save')).toBe('ip6tables-save');
    expect(new Iptables({ runner, family: 'ipv6', backend: 'legacy' }).binary('restore')).toBe(
      'ip6tables-legacy-restore',
    );
    expect(new Iptables({ runner, backend: 'nft' }).binary('iptables')).toBe('iptables-nft');
  });

  it('restores with --noflush, waits for the xtables lock and runs in the namespace', async () => {
    const runner = new RecordingRunner();
    await new Iptables({ runner, family: 'ipv6', netns: 'krt-n', waitSeconds: 7 }).restore('*filter\nCOMMIT\n');
    expect(runner.invocations).toEqual([
      expect.objectContaining({
        line: 'ip6tables-restore --noflush --wait=7',
        input: '*filter\nCOMMIT\n',
        netns: 'krt-n',
      }),
    ]);
    expect(runner.invocations[0]!.timeoutMs).toBeGreaterThan(7_000);
  });

  it('adds the rejected input line to a restore error', async () => {
    const runner = new RecordingRunner().on('iptables-restore', {
      exitCode: 1,
      stderr: 'iptables-restore: line 3 failed: No chain/target/match by that name.\n',
    });
    const input = '*filter\n:KRT-A - [0:0]\n-A KRT-A -j KRT-MISSING\nCOMMIT\n';
    const error = (await new Iptables({ runner }).restore(input).catch((e: unknown) => e)) as CommandError;
    expect(error).toBeInstanceOf(CommandError);
    expect(error.message).toContain('stderr: iptables-restore: line 3 failed');
    expect(error.message).toContain('input line 3: -A KRT-A -j KRT-MISSING');
  });

  it('parses our chains out of iptables-save -t <table>', async () => {
    const runner = new RecordingRunner().on('iptables-save -t filter', {
      stdout: '*filter\n:FORWARD ACCEPT [0:0]\n:KRT-A - [0:0]\n-A FORWARD -j KRT-A\n-A KRT-A -j ACCEPT\nCOMMIT\n',
    });
    const own = await new Iptables({ runner }).ownChains('filter', 'KRT-');
    expect(own.chains.map((chain) => chain.name)).toEqual(['KRT-A']);
    expect(own.jumpsIn.map((rule) => rule.spec)).toEqual(['-j KRT-A']);
  });

  it('answers hasRule from the exit code of iptables -C', async () => {
    const runner = new RecordingRunner()
      .on('iptables', { exitCode: 1, stderr: 'Bad rule' })
      .on((spec) => spec.args?.includes('ACCEPT') ?? false, { exitCode: 0 });
    const iptables = new Iptables({ runner });
    await expect(iptables.hasRule('filter', 'FORWARD', ['-j', 'ACCEPT'])).resolves.toBe(true);
    await expect(iptables.hasRule('filter', 'FORWARD', ['-j', 'DROP'])).resolves.toBe(false);
    expect(runner.lines()[0]).toBe('iptables --wait=5 -t filter -C FORWARD -j ACCEPT');
  });

  it('still fails hasRule for other errors', async () => {
    const runner = new RecordingRunner().on('iptables', { exitCode: 2, stderr: 'unknown option' });
    await expect(new Iptables({ runner }).hasRule('filter', 'FORWARD', ['--bogus'])).rejects.toThrow(/unknown option/);
  });

  it('reads the backend from iptables -V', async () => {
    const runner = new RecordingRunner()
      .once('iptables -V', { stdout: 'iptables v1.8.9 (nf_tables)\n' })
      .once('iptables -V', { stdout: 'iptables v1.8.7 (legacy)\n' });
    const iptables = new Iptables({ runner });
    await expect(iptables.version()).resolves.toEqual({ version: '1.8.9', backend: 'nf_tables' });
    await expect(iptables.version()).resolves.toEqual({ version: '1.8.7', backend: 'legacy' });
  });
});

describe('Iptables.hasRandomFully', () => {
  it.each([
    ['iptables v1.6.1', false],
    ['iptables v1.6.2', true],
    ['iptables v1.8.9 (nf_tables)', true],
    ['iptables v1.10.0 (legacy)', true],
    ['iptables v1.4.21', false],
  ])('%s: %s, as go-iptables decides for kube-router', async (stdout, expected) => {
    const runner = new RecordingRunner().on('iptables -V', { stdout });
    const iptables = new Iptables({ runner });
    expect(await iptables.hasRandomFully()).toBe(expected);
    expect(await iptables.hasRandomFully()).toBe(expected);
    expect(runner.invocations.filter((call) => call.line.includes(' -V'))).toHaveLength(1);
  });

  it('asks again after a failed probe', async () => {
    const runner = new RecordingRunner().once('iptables -V', { exitCode: 1, stderr: 'no iptables' }).on('iptables -V', { stdout: 'iptables v1.8.9' });
    const iptables = new Iptables({ runner });
    await expect(iptables.hasRandomFully()).rejects.toThrow();
    expect(await iptables.hasRandomFully()).toBe(true);
  });
});
