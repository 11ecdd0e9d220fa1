/**
 * `bench-report`: the root `npm run bench` (run every package's bench, then one table and one JSON report of the run)
 * and `npm run bench:compare` (the run against the committed baseline, exit 1 when a figure got worse).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
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
    .argument('[nxArgs...]', 'extra arguments for nx run-many, e.g. --projects=@kube-router/kube')
    // nx's own options (--projects, --exclude) pass through to it rather than being refused here.
    .allowUnknownOption()
    .action(async (nxArgs: string[], options: { out: string; timeoutMin: number }) => {
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
        if (code !== 0) log(`bench-report: some benches failed (nx exited ${code}); their figures are missing above`);
        process.exitCode = code;
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
  return program;
}
