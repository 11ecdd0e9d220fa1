import type { CliDependencies } from './run-cli.js';

/** Where a command writes: the dependencies' writers (tests capture them), else the process's own streams. */
export function cliOutput(deps: Pick<CliDependencies, 'stdout' | 'stderr'>): { stdout: (text: string) => void; stderr: (text: string) => void } {
  return {
    stdout: deps.stdout ?? ((text: string) => void process.stdout.write(text)),
    stderr: deps.stderr ?? ((text: string) => void process.stderr.write(text)),
  };
}
