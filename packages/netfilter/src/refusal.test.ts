import { describe, expect, it } from 'vitest';
import { CommandError } from './command.js';
import { isNftRefusal } from './nft.js';

const failure = (details: Partial<ConstructorParameters<typeof CommandError>[0]>) =>
  new CommandError({ command: 'ip', args: ['netns', 'exec', 'n', 'nft', '-f', '-'], exitCode: 1, ...details });

describe('CommandError.ranAndFailed and isNftRefusal', () => {
  it('a tool that ran and exited non-zero failed on its input; a timeout, a signal or a spawn failure did not', () => {
    expect(failure({}).ranAndFailed).toBe(true);
    expect(failure({ exitCode: null, signal: 'SIGKILL', timedOut: true }).ranAndFailed).toBe(false);
    expect(failure({ exitCode: null, signal: 'SIGTERM' }).ranAndFailed).toBe(false);
    expect(failure({ exitCode: null, spawnError: 'ENOENT' }).ranAndFailed).toBe(false);
    expect(failure({ exitCode: null, notRunBecause: 'the runner is stopped' }).ranAndFailed).toBe(false);
  });

  it('nft refuses with exit 1 and its Error: lines; entering the namespace or starting nft failing is no refusal', () => {
    expect(isNftRefusal(failure({ stderr: '/dev/stdin:1:19-22: Error: No such file or directory\n' }))).toBe(true);
    expect(isNftRefusal(failure({ stderr: 'Error: Could not process rule: Too many open files in system\n' }))).toBe(true);
    expect(isNftRefusal(failure({ stderr: 'exec of "nft" failed: No such file or directory\n' }))).toBe(false);
    expect(isNftRefusal(failure({ exitCode: 255, stderr: 'Cannot open network namespace "n": No such file or directory\n' }))).toBe(false);
    expect(isNftRefusal(failure({ exitCode: 3, stderr: 'Error: cannot talk to netlink\n' }))).toBe(false);
    expect(isNftRefusal(new Error('Error: not a command'))).toBe(false);
  });
});
