import type { Unsupported } from './feature-support.js';
import { parseFlags, type FlagsResult } from './parse-flags.js';
import type { CliDependencies } from './run-cli.js';

/** Where a command writes: the dependencies' writers (tests capture them), else the process's own streams. */
export function cliOutput(deps: Pick<CliDependencies, 'stdout' | 'stderr'>): { stdout: (text: string) => void; stderr: (text: string) => void } {
  return {
    stdout: deps.stdout ?? ((text: string) => void process.stdout.write(text)),
    stderr: deps.stderr ?? ((text: string) => void process.stderr.write(text)),
  };
}

/**
 * The command line's flags, as kube-router and `kube-router diff` read them; when parsing ends the command (help,
 * version, a bad flag) what it printed is written out and only its exit code is returned.
 */
export function parseCommandLine(
  argv: readonly string[],
  deps: Pick<CliDependencies, 'stdout' | 'stderr' | 'env'>,
): Extract<FlagsResult, { ok: true }> | { ok: false; exitCode: number } {
  const flags = parseFlags(argv, deps.env ?? process.env);
  if (flags.ok) return flags;
  const { stdout, stderr } = cliOutput(deps);
  if (flags.stdout) stdout(flags.stdout);
  if (flags.stderr) stderr(flags.stderr);
  return { ok: false, exitCode: flags.exitCode };
}

/** The refusal of a command line that asks for what this build cannot do, one line per setting. */
export function unsupportedMessage(unsupported: readonly Unsupported[]): string {
  return `this build cannot do what the command line asks:\n${unsupported.map((u) => `  - ${u.message}`).join('\n')}`;
}
