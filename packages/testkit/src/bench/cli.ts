/**
 * `bench-report`: the root `npm run bench` (run every package's bench, then one table and one JSON report of the run)
 * and `npm run bench:compare` (the run against the committed baseline, exit 1 when a figure got worse).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { evaluateBenchGoals, formatBenchGoals, formatBenchGoalsMarkdown, readBenchGoals } from './goals.js';
import type { BenchRecord } from './report.js';
import {
  BENCH_REPORT_ENV,
  benchRun,
  compareBenchReports,
  figureKey,
  formatBenchComparison,
  formatBenchTable,
  readBenchRecords,
  readBenchRun,
} from './report.js';

export const DEFAULT_RUN_FILE = 'bench/last-run.json';
export const DEFAULT_BASELINE_FILE = 'bench/baseline.json';
/** The project's goals, held against every run; `run` skips them when this default file does not exist. */
export const DEFAULT_GOALS_FILE = 'bench/goals.json';

/** The goals' lines for a run's figures: a goals file given on purpose must exist, the default one may not. */
function goalLines(figures: readonly BenchRecord[], goalsFile: string | undefined, markdown = false): string[] {
  const file = goalsFile ?? DEFAULT_GOALS_FILE;
  if (goalsFile === undefined && !existsSync(file)) return [];
  const results = evaluateBenchGoals(readBenchGoals(file), figures);
  return markdown ? formatBenchGoalsMarkdown(results) : formatBenchGoals(results);
}

function fraction(value: string): number {
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed < 0) throw new InvalidArgumentError('must be a non-negative number, e.g. 0.2 for 20%');
  return parsed;
}

function positiveMinutes(value: string): number {
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed <= 0) throw new InvalidArgumentError('must be a positive number of minutes');
  return parsed;
}

/** Runs a command with inherited output, killing it when it outlives the timeout; resolves with its exit code. */
function runInherited(command: string, args: readonly string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { stdio: 'inherit', env });
    const timer = setTimeout(() => {
      console.error(`bench-report: ${command} ${args.join(' ')} ran longer than ${timeoutMs / 60_000} min, stopping it`);
      child.kill('SIGTERM');
    }, timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`bench-report: could not start ${command}: ${error.message}`));
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolvePromise(code ?? (signal ? 128 : 1));
    });
  });
}

export function benchReportCommand(log: (line: string) => void = console.log): Command {
  const program = new Command('bench-report').description("Runs the packages' benches and compares a run with the baseline");
  program
    .command('run')
    .description('run every bench (or the nx projects given after --), print one table of their figures and write the run')
    .option('--out <file>', 'where to write the run as JSON', DEFAULT_RUN_FILE)
    .option('--timeout-min <minutes>', 'stop the benches after this long', positiveMinutes, 120)
    .option('--goals <file>', `the goals to hold the run against (default ${DEFAULT_GOALS_FILE}, skipped when absent)`)
    .argument('[nxArgs...]', 'extra arguments for nx run-many, e.g. --projects=@kube-router/kube')
    // nx's own options (--projects, --exclude) pass through to it rather than being refused here.
    .allowUnknownOption()
    .action(async (nxArgs: string[], options: { out: string; timeoutMin: number; goals?: string }) => {
      const scratch = mkdtempSync(join(tmpdir(), 'bench-report-'));
      const records = join(scratch, 'figures.jsonl');
      try {
        writeFileSync(records, '');
        const nx = resolve('node_modules/.bin/nx');
        const code = await runInherited(
          existsSync(nx) ? nx : 'npx',
          [...(existsSync(nx) ? [] : ['nx']), 'run-many', '-t', 'bench', '--parallel=1', '--outputStyle=stream', ...nxArgs],
          { ...process.env, [BENCH_REPORT_ENV]: records },
          options.timeoutMin * 60_000,
        );
        const figures = readBenchRecords(records);
        mkdirSync(dirname(resolve(options.out)), { recursive: true });
        writeFileSync(options.out, JSON.stringify(benchRun(figures), null, 2) + '\n');
        log('');
        log(`bench report: ${figures.length} figures from this run, written to ${options.out}`);
        for (const line of formatBenchTable(figures)) log(line);
        let goalsFailed = false;
        try {
          const goals = goalLines(figures, options.goals);
          if (goals.length > 0) log('');
          for (const line of goals) log(line);
        } catch (error) {
          // The run is written already; a broken goals file must not hide it.
          log(`bench-report: the goals were not evaluated: ${(error as Error).message}`);
          goalsFailed = true;
        }
        if (code !== 0) log(`bench-report: some benches failed (nx exited ${code}); their figures are missing above`);
        process.exitCode = code !== 0 ? code : goalsFailed ? 1 : 0;
      } finally {
        rmSync(scratch, { recursive: true, force: true });
      }
    });
  program
    .command('compare')
    .description('name every figure of a run that is worse than the baseline by more than the tolerance; exit 1 if any')
    .option('--run <file>', 'the run to check', DEFAULT_RUN_FILE)
    .option('--baseline <file>', 'the committed baseline', DEFAULT_BASELINE_FILE)
    .option('--tolerance <fraction>', 'how much worse a figure may get', fraction, 0.2)
    .option('--ratios-only', 'compare only ratios (unit x), which hold between machines')
    .action((options: { run: string; baseline: string; tolerance: number; ratiosOnly?: boolean }) => {
      const comparison = compareBenchReports(readBenchRun(options.baseline), readBenchRun(options.run), {
        tolerance: options.tolerance,
        ratiosOnly: options.ratiosOnly ?? false,
      });
      for (const line of formatBenchComparison(comparison, options.tolerance)) log(line);
      process.exitCode = comparison.regressions.length > 0 ? 1 : 0;
    });
  program
    .command('merge')
    .description('join runs into one report (a figure in a later run replaces the same figure of an earlier one), e.g. to assemble a baseline from runs of single packages')
    .argument('<runs...>', 'the runs, earliest first')
    .requiredOption('--out <file>', 'where to write the joined report')
    .action((files: string[], options: { out: string }) => {
      const byKey = new Map(files.flatMap((file) => readBenchRun(file).figures).map((figure) => [figureKey(figure), figure]));
      writeFileSync(options.out, JSON.stringify(benchRun([...byKey.values()]), null, 2) + '\n');
      log(`${byKey.size} figures from ${files.length} runs written to ${options.out}`);
    });
  program
    .command('table')
    .description("print a run's table again")
    .argument('[file]', 'the run', DEFAULT_RUN_FILE)
    .action((file: string) => {
      for (const line of formatBenchTable(readBenchRun(file).figures)) log(line);
    });
  program
    .command('goals')
    .description("hold a run's figures against the project's goals: each goal, the run's figures for it, met or not, the cause of a miss")
    .argument('[file]', 'the run, e.g. bench/baseline.json', DEFAULT_RUN_FILE)
    .option('--goals <file>', 'the goals', DEFAULT_GOALS_FILE)
    .option('--markdown', 'one Markdown table, a row per goal (as docs/benchmarks.md shows it)')
    .action((file: string, options: { goals: string; markdown?: boolean }) => {
      for (const line of goalLines(readBenchRun(file).figures, options.goals, options.markdown ?? false)) log(line);
    });
  return program;
}
