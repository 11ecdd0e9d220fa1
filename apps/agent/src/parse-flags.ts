import { readFileSync } from 'node:fs';
import { toConfig, type AgentConfig } from './config.js';
import { FLAGS, type FlagDefinition, type FlagName, type FlagValues } from './flags.js';
import { validateFlags } from './flag-validation.js';
import { FlagSyntaxError, formatFlagUsages, parseCommandLine } from './pflag.js';

export type FlagsResult =
  | { ok: true; config: AgentConfig; values: FlagValues; given: ReadonlySet<FlagName> }
  /** Help, version, or a usage error: print and exit with exitCode (0 for help and version, 2 for bad flags). */
  | { ok: false; exitCode: number; stdout: string; stderr: string };

const USAGE_ERROR = 2;

/**
 * Parses kube-router's command line with pflag's syntax (see pflag.ts): every kube-router flag with its name, default
 * and syntax, plus the agent's own. Checks the values (naming the flag), but not whether this build implements them:
 * that is unsupportedSettings(), which needs the catalog.
 */
export function parseFlags(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): FlagsResult {
  const usageError = (problems: readonly string[]): FlagsResult => ({
    ok: false,
    exitCode: USAGE_ERROR,
    stdout: '',
    stderr: `${problems.map((p) => `error: ${p}`).join('\n')}\n(run kube-router --help for usage)\n`,
  });
  let parsed;
  try {
    parsed = parseCommandLine(argv, FLAGS, SHORTHANDS);
  } catch (error) {
    if (error instanceof FlagSyntaxError) return usageError([error.message]);
    throw error;
  }
  const values = parsed.values as FlagValues;
  if (values.help) return { ok: false, exitCode: 0, stdout: helpText(), stderr: '' };
  if (values.version) return { ok: false, exitCode: 0, stdout: `${packageVersion()}\n`, stderr: '' };
  const problems = validateFlags(values);
  // kube-router refuses them too: a stray word is usually a boolean written `--flag false` instead of `--flag=false`.
  if (parsed.positional.length > 0) {
    problems.unshift(
      `unrecognized positional argument(s): ${parsed.positional.join(' ')}` +
        ' (boolean flags take their value as --flag=false, not --flag false)',
    );
  }
  if (problems.length > 0) return usageError(problems);
  return { ok: true, config: toConfig(values, env), values, given: parsed.given as Set<FlagName> };
}

/** The help text, as `kube-router --help` prints it: pflag's layout, every flag with its default. */
export function helpText(): string {
  const entries = Object.entries(FLAGS as Record<string, FlagDefinition>).map(([name, definition]) => ({
    name,
    syntax: definition,
    usage: definition.usage,
    ...(!definition.implemented && {
      note: definition.builtValue === undefined ? '[not implemented in this build]' : `[not implemented in this build: it does what ${String(definition.builtValue)} says]`,
    }),
    ...(definition.shorthand !== undefined && { shorthand: definition.shorthand }),
  }));
  return `Usage of kube-router:\n${formatFlagUsages(entries)}`;
}

const SHORTHANDS: Record<string, FlagName> = Object.fromEntries(
  Object.entries(FLAGS as Record<string, FlagDefinition>)
    .filter(([, definition]) => definition.shorthand !== undefined)
    .map(([name, definition]) => [definition.shorthand, name]),
);

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}
