import { describe, expect, it } from 'vitest';
import { CommandError } from './command.js';
import { IpRoute2 } from './ip.js';
import { RecordingRunner } from './recording-runner.js';

// The stderr shapes below are what iproute2 6.1 writes for `ip -force -batch -` (see ip.real.test.ts for the kernel).
describe('IpRoute2.batchEach', () => {
  it('sends every command to one ip -force -batch in the namespace, with the deadline', async () => {
    const runner = new RecordingRunner();
    const ip = new IpRoute2({ runner, netns: 'n1', timeoutMs: 1_234 });
    expect(await ip.batchEach(['route add 10.1.0.0/24 dev eth0', 'route del 10.2.0.0/24'])).toEqual([]);
    expect(runner.invocations.map((i) => [i.line, i.input, i.netns, i.timeoutMs])).toEqual([
      ['ip -force -batch -', 'route add 10.1.0.0/24 dev eth0\nroute del 10.2.0.0/24\n', 'n1', 1_234],
    ]);
  });

  it('splits stderr by command, each failure with only its own messages and its line', async () => {
    const runner = new RecordingRunner().on('ip', {
      exitCode: 1,
      stderr: 'Error: Nexthop has invalid gateway.\nCommand failed -:2\nRTNETLINK answers: File exists\nCommand failed -:3\n',
    });
    const ip = new IpRoute2({ runner });
    const failures = await ip.batchEach(['route add a', 'route add b', 'route add c', 'route add d']);
    expect(failures.map((f) => [f.line, f.command, f.error.stderr])).toEqual([
      [2, 'route add b', 'Error: Nexthop has invalid gateway.\nCommand failed -:2'],
      [3, 'route add c', 'RTNETLINK answers: File exists\nCommand failed -:3'],
    ]);
    expect(failures[0]!.error).toBeInstanceOf(CommandError);
    expect(failures[0]!.error.message).toContain('input line 2: route add b');
  });

  it('rejects as a whole when ip could not run, timed out, or stopped on a command it could not parse', async () => {
    const cannotRun = new RecordingRunner().on('ip', { exitCode: 255, stderr: 'Cannot open network namespace "x": No such file or directory\n' });
    await expect(new IpRoute2({ runner: cannotRun }).batchEach(['route add a'])).rejects.toThrow(/Cannot open network namespace/);
    const timedOut = new RecordingRunner().on('ip', { timedOut: true });
    await expect(new IpRoute2({ runner: timedOut }).batchEach(['route add a'])).rejects.toMatchObject({ timedOut: true });
    const stopped = new RecordingRunner().on('ip', {
      exitCode: 1,
      stderr: 'Cannot find device "nosuch"\nCommand failed -:1\nError: inet address is expected rather than "192.0.2.300".\n',
    });
    await expect(new IpRoute2({ runner: stopped }).batchEach(['route add a', 'route add b', 'route add c'])).rejects.toThrow(
      'ip stopped before the end of the batch',
    );
  });

  it('refuses a command with a line break, which would smuggle in another command', async () => {
    const ip = new IpRoute2({ runner: new RecordingRunner() });
    await expect(ip.batchEach(['route add a\nroute flush all'])).rejects.toThrow(RangeError);
  });
});
