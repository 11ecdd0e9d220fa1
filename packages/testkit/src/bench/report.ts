/**
 * The shared bench reporter: every bench names the figures it measured with `reportBench`, and the root
 * `npm run bench` gathers them from all packages into one report of the run (one table, one JSON file), which
 * `compareBenchReports` holds against a committed baseline.
 *
 * A bench process appends one JSON line per `reportBench` call to the file named by KUBE_ROUTER_BENCH_REPORT. Lines
 * are appended, never rewritten, so the benches of one package (run one after another) and a bench that reports in
 * several steps all land in the same file without reading it back.
 */
import { appendFileSync, readFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { basename, extname } from 'node:path';

/** The environment variable naming the JSON Lines file that `reportBench` appends to. */
export const BENCH_REPORT_ENV = 'KUBE_ROUTER_BENCH_REPORT';

/** The unit of a ratio (this run's time against a baseline measured in the same run), the figures to compare. */
export const RATIO_UNIT = 'x';

export interface BenchFigure {
  /** Unique within the plugin, stable across runs: the baseline is matched on it. */
  name: string;
  value: number;
  /** `x` for a ratio; otherwise what the value counts: `ms`, `MiB`, `B`, `/s`, `rules`, ... */
  unit: string;
  /** Which direction is an improvement; the baseline comparison flags moves the other way. */
  better: 'lower' | 'higher';
}

export interface BenchReportInput {
  /** The package or plugin measured, e.g. `netpol-iptables`. */
  plugin: string;
  /** Which bench of the plugin; the running script's name when left out. */
  bench?: string;
  figures: readonly BenchFigure[];
}

/** One figure as it appears in a run's report. */
export interface BenchRecord extends BenchFigure {
  plugin: string;
  bench: string;
}

export interface BenchRun {
  version: 1;
  createdAt: string;
  node: string;
  /** Absolute figures mean little without the machine they were taken on. */
  host: { cpus: number; cpuModel: string };
  figures: BenchRecord[];
}

export interface ReportBenchOptions {
  /** Where to append; KUBE_ROUTER_BENCH_REPORT when left out. Nothing is written when neither is set. */
  file?: string;
  /** Where the figures are printed; `console.log` when left out, `false` for silence. */
  log?: ((line: string) => void) | false;
}

function validFigure(plugin: string, figure: BenchFigure): void {
  const where = `bench figure ${plugin}/${figure.name}`;
  if (!figure.name.trim()) throw new Error(`${where}: the name is empty`);
  if (!Number.isFinite(figure.value)) throw new Error(`${where}: the value ${figure.value} is not a finite number`);
  if (!figure.unit.trim()) throw new Error(`${where}: the unit is empty`);
  if (figure.better !== 'lower' && figure.better !== 'higher') throw new Error(`${where}: better must be 'lower' or 'higher'`);
}

function scriptName(): string {
  const script = process.argv[1];
  return script ? basename(script, extname(script)) : 'bench';
}

/**
 * Records the named figures of a bench: prints them and, when a report file is set, appends them to it. Throws on a
 * figure that is not a finite number or a name used twice, as either is a bug in the bench, not a measurement.
 */
export function reportBench(input: BenchReportInput, options: ReportBenchOptions = {}): BenchRecord[] {
  if (!input.plugin.trim()) throw new Error('reportBench: the plugin name is empty');
  const bench = input.bench ?? scriptName();
  const seen = new Set<string>();
  for (const figure of input.figures) {
    validFigure(input.plugin, figure);
    if (seen.has(figure.name)) throw new Error(`bench figure ${input.plugin}/${figure.name} is reported twice`);
    seen.add(figure.name);
  }
  const records = input.figures.map(({ name, value, unit, better }) => ({ plugin: input.plugin, bench, name, value, unit, better }));
  const log = options.log === undefined ? console.log : options.log;
  if (log) for (const line of formatBenchTable(records)) log(line);
  const file = options.file ?? process.env[BENCH_REPORT_ENV];
  if (file) appendFileSync(file, records.map((record) => JSON.stringify(record) + '\n').join(''));
  return records;
}

/** Reads what `reportBench` appended; a figure reported again later (a bench run twice) replaces the earlier one. */
export function readBenchRecords(file: string): BenchRecord[] {
  const byKey = new Map<string, BenchRecord>();
  const lines = readFileSync(file, 'utf8').split('\n').filter((line) => line.trim());
  for (const [index, line] of lines.entries()) {
    let record: BenchRecord;
    try {
      record = JSON.parse(line) as BenchRecord;
    } catch (error) {
      throw new Error(`${file} line ${index + 1} is not JSON: ${(error as Error).message}`, { cause: error });
    }
    validFigure(record.plugin, record);
    byKey.delete(figureKey(record));
    byKey.set(figureKey(record), record);
  }
  return [...byKey.values()];
}

/** The run's report as written beside the baseline. */
export function benchRun(figures: readonly BenchRecord[], createdAt = new Date()): BenchRun {
  return {
    version: 1,
    createdAt: createdAt.toISOString(),
    node: process.version,
    host: { cpus: availableParallelism(), cpuModel: cpus()[0]?.model.trim() ?? 'unknown' },
    figures: [...figures],
  };
}

/** Reads a run's report or the baseline, checking its shape so a hand-edited baseline fails clearly. */
export function readBenchRun(file: string): BenchRun {
  let run: BenchRun;
  try {
    run = JSON.parse(readFileSync(file, 'utf8')) as BenchRun;
  } catch (error) {
    throw new Error(`${file}: ${(error as Error).message}`, { cause: error });
  }
  if (run?.version !== 1 || !Array.isArray(run.figures)) throw new Error(`${file} is not a bench report (version 1 with figures)`);
  for (const figure of run.figures) validFigure(figure.plugin, figure);
  return run;
}

/** plugin/name: what identifies a figure across runs (a bench may be renamed or split without losing its baseline). */
export function figureKey(figure: Pick<BenchRecord, 'plugin' | 'name'>): string {
  return `${figure.plugin}/${figure.name}`;
}

/** A figure's value as the tables print it: thousands grouped, small values with 2-3 decimals. */
export function formatValue(value: number): string {
  const magnitude = Math.abs(value);
  if (magnitude >= 1000 || Number.isInteger(value)) return Math.round(value).toLocaleString('en-US');
  if (magnitude >= 10) return value.toFixed(1);
  return value.toFixed(magnitude >= 1 ? 2 : 3);
}

function table(header: readonly string[], rows: readonly string[][], rightAligned: ReadonlySet<number>): string[] {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, column) => (rightAligned.has(column) ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!)))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((width) => '-'.repeat(width))), ...rows.map(line)];
}

/** The figures as a plain-text table, one row each, in the order given (the order the benches reported them). */
export function formatBenchTable(figures: readonly BenchRecord[]): string[] {
  const rows = figures.map((figure) => [
    figure.plugin,
    figure.bench,
    figure.name,
    formatValue(figure.value),
    figure.unit,
    figure.better === 'lower' ? 'lower' : 'higher',
  ]);
  return table(['plugin', 'bench', 'figure', 'value', 'unit', 'better'], rows, new Set([3]));
}

export interface BenchRegression {
  key: string;
  baseline: number;
  current: number;
  unit: string;
  better: 'lower' | 'higher';
  /** How much worse, as a fraction of the baseline (0.25 = 25% worse). */
  worseBy: number;
}

export interface BenchComparison {
  regressions: BenchRegression[];
  /** In the baseline but not in this run: a bench that failed, was skipped, or a figure renamed. */
  missing: string[];
  /** In this run but not in the baseline: new figures, to be added when the baseline is refreshed. */
  added: string[];
  compared: number;
}

export interface CompareBenchOptions {
  /** A figure worse than the baseline by more than this fraction is a regression; 0.2 when left out. */
  tolerance?: number;
  /** Compare only ratios (unit `x`), the figures that hold between machines; every figure when left out. */
  ratiosOnly?: boolean;
}

/**
 * Holds a run against the baseline: every figure of both that moved the wrong way by more than the tolerance. A
 * baseline of 0 counts any worsening as a regression (there is no fraction of nothing).
 */
export function compareBenchReports(baseline: BenchRun, current: BenchRun, options: CompareBenchOptions = {}): BenchComparison {
  const tolerance = options.tolerance ?? 0.2;
  const selected = (figure: BenchRecord) => !options.ratiosOnly || figure.unit === RATIO_UNIT;
  const before = new Map(baseline.figures.filter(selected).map((figure) => [figureKey(figure), figure]));
  const after = new Map(current.figures.filter(selected).map((figure) => [figureKey(figure), figure]));
  const regressions: BenchRegression[] = [];
  let compared = 0;
  for (const [key, now] of after) {
    const then = before.get(key);
    if (!then) continue;
    compared++;
    const worsening = now.better === 'lower' ? now.value - then.value : then.value - now.value;
    if (worsening <= 0) continue;
    const worseBy = then.value === 0 ? Infinity : worsening / Math.abs(then.value);
    if (worseBy > tolerance) regressions.push({ key, baseline: then.value, current: now.value, unit: now.unit, better: now.better, worseBy });
  }
  return {
    regressions,
    missing: [...before.keys()].filter((key) => !after.has(key)),
    added: [...after.keys()].filter((key) => !before.has(key)),
    compared,
  };
}

/** The comparison as lines to print: one per regression, then what could not be compared. */
export function formatBenchComparison(comparison: BenchComparison, tolerance = 0.2): string[] {
  const lines = [`compared ${comparison.compared} figures with the baseline (tolerance ${Math.round(tolerance * 100)}%)`];
  if (comparison.regressions.length > 0) {
    lines.push(`${comparison.regressions.length} figures more than ${Math.round(tolerance * 100)}% worse than the baseline:`);
    const rows = comparison.regressions.map((r) => [
      r.key,
      formatValue(r.baseline),
      formatValue(r.current),
      r.unit,
      Number.isFinite(r.worseBy) ? `${Math.round(r.worseBy * 100)}%` : 'from 0',
      `${r.better} is better`,
    ]);
    lines.push(...table(['figure', 'baseline', 'now', 'unit', 'worse by', ''], rows, new Set([1, 2, 4])));
  } else {
    lines.push('no figure is worse than the baseline beyond the tolerance');
  }
  if (comparison.missing.length > 0) lines.push(`not in this run (bench failed or skipped?): ${comparison.missing.join(', ')}`);
  if (comparison.added.length > 0) lines.push(`new since the baseline: ${comparison.added.join(', ')}`);
  return lines;
}
