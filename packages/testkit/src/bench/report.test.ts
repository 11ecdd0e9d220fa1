import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, extname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { benchReportCommand } from './cli.js';
import type { BenchFigure, BenchRun } from './report.js';
import { benchRun, compareBenchReports, formatBenchComparison, formatBenchTable, readBenchRecords, readBenchRun, reportBench } from './report.js';

const syncRatio: BenchFigure = { name: 'full sync / bare restore', value: 1.1, unit: 'x', better: 'lower' };
const updatesPerSecond: BenchFigure = { name: 'watch updates', value: 20_000, unit: '/s', better: 'higher' };

function run(figures: Array<BenchFigure & { plugin?: string }>): BenchRun {
  return benchRun(figures.map(({ plugin = 'netpol-iptables', ...figure }) => ({ plugin, bench: 'sync', ...figure })));
}

describe('reportBench', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'bench-report-test-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('appends every call to the report file and reads them back, a repeated figure replacing the earlier one', () => {
    const file = join(dir, 'figures.jsonl');
    const printed: string[] = [];
    reportBench({ plugin: 'netpol-iptables', bench: 'sync', figures: [syncRatio] }, { file, log: (line) => printed.push(line) });
    reportBench({ plugin: 'kube', bench: 'informer', figures: [updatesPerSecond] }, { file, log: false });
    reportBench({ plugin: 'netpol-iptables', bench: 'sync', figures: [{ ...syncRatio, value: 1.2 }] }, { file, log: false });
    expect(readBenchRecords(file)).toEqual([
      { plugin: 'kube', bench: 'informer', ...updatesPerSecond },
      { plugin: 'netpol-iptables', bench: 'sync', ...syncRatio, value: 1.2 },
    ]);
    expect(printed.join('\n')).toMatch(/netpol-iptables\s+sync\s+full sync \/ bare restore\s+1\.10\s+x\s+lower/);
  });

  it('writes nothing without a report file, and names the bench after the running script', () => {
    const records = reportBench({ plugin: 'kube', figures: [updatesPerSecond] }, { file: '', log: false });
    const script = process.argv[1] ?? '';
    expect(records[0]?.bench).toBe(script ? basename(script, extname(script)) : 'bench');
    expect(records[0]?.bench).not.toBe('');
  });

  it('refuses a figure that is not a number, has no unit, or is named twice', () => {
    const report = (figures: BenchFigure[]) => () => reportBench({ plugin: 'kube', figures }, { file: '', log: false });
    expect(report([{ ...syncRatio, value: Number.NaN }])).toThrow(/not a finite number/);
    expect(report([{ ...syncRatio, unit: ' ' }])).toThrow(/unit is empty/);
    expect(report([syncRatio, syncRatio])).toThrow(/reported twice/);
  });
});

describe('compareBenchReports', () => {
  it('names a figure more than 20% worse in either direction of better, and nothing within the tolerance', () => {
    const baseline = run([syncRatio, updatesPerSecond, { name: 'rss', value: 100, unit: 'MiB', better: 'lower' }]);
    const current = run([
      { ...syncRatio, value: 1.35 }, // 23% slower
      { ...updatesPerSecond, value: 15_000 }, // 25% fewer
      { name: 'rss', value: 119, unit: 'MiB', better: 'lower' }, // 19%: within
    ]);
    const comparison = compareBenchReports(baseline, current);
    expect(comparison.regressions.map((r) => [r.key, Math.round(r.worseBy * 100)])).toEqual([
      ['netpol-iptables/full sync / bare restore', 23],
      ['netpol-iptables/watch updates', 25],
    ]);
    expect(comparison.compared).toBe(3);
    expect(formatBenchComparison(comparison).join('\n')).toMatch(/2 figures more than 20% worse/);
  });

  it('never flags an improvement, and lists figures missing from the run or new in it', () => {
    const baseline = run([syncRatio, { name: 'gone', value: 1, unit: 'ms', better: 'lower' }]);
    const current = run([{ ...syncRatio, value: 0.5 }, { name: 'new', value: 1, unit: 'ms', better: 'lower' }]);
    const comparison = compareBenchReports(baseline, current);
    expect(comparison).toMatchObject({ regressions: [], missing: ['netpol-iptables/gone'], added: ['netpol-iptables/new'], compared: 1 });
  });

  it('compares only ratios when asked, and treats any worsening from a zero baseline as a regression', () => {
    const baseline = run([{ ...syncRatio, value: 0 }, { name: 'rss', value: 100, unit: 'MiB', better: 'lower' }]);
    const current = run([{ ...syncRatio, value: 0.01 }, { name: 'rss', value: 200, unit: 'MiB', better: 'lower' }]);
    const comparison = compareBenchReports(baseline, current, { ratiosOnly: true });
    expect(comparison.regressions.map((r) => r.key)).toEqual(['netpol-iptables/full sync / bare restore']);
    expect(formatBenchComparison(comparison).join('\n')).toMatch(/from 0/);
  });
});

describe('bench-report compare', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'bench-report-cli-'));
    process.exitCode = undefined;
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
    process.exitCode = undefined;
  });

  async function compare(current: BenchRun): Promise<{ lines: string[]; exitCode: typeof process.exitCode }> {
    writeFileSync(join(dir, 'baseline.json'), JSON.stringify(run([syncRatio])));
    writeFileSync(join(dir, 'run.json'), JSON.stringify(current));
    const lines: string[] = [];
    await benchReportCommand((line) => lines.push(line)).parseAsync(
      ['compare', '--baseline', join(dir, 'baseline.json'), '--run', join(dir, 'run.json')],
      { from: 'user' },
    );
    return { lines, exitCode: process.exitCode };
  }

  it('exits 1 naming the figure that got worse, 0 when none did', async () => {
    const worse = await compare(run([{ ...syncRatio, value: 2 }]));
    expect(worse.exitCode).toBe(1);
    expect(worse.lines.join('\n')).toContain('netpol-iptables/full sync / bare restore');
    expect((await compare(run([syncRatio]))).exitCode).toBe(0);
  });

  it('refuses a file that is not a bench report', () => {
    writeFileSync(join(dir, 'other.json'), JSON.stringify({ figures: 'none' }));
    expect(() => readBenchRun(join(dir, 'other.json'))).toThrow(/not a bench report/);
    expect(formatBenchTable(readBenchRun(writeRun(dir)).figures)[0]).toMatch(/^plugin\s+bench\s+figure\s+value/);
    expect(readFileSync(join(dir, 'ok.json'), 'utf8')).toContain('"version": 1');
  });
});

function writeRun(dir: string): string {
  const file = join(dir, 'ok.json');
  writeFileSync(file, JSON.stringify(run([syncRatio]), null, 2));
  return file;
}

describe('bench-report merge', () => {
  it('joins runs, a later run replacing the figures it shares with an earlier one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-report-merge-'));
    try {
      writeFileSync(join(dir, 'a.json'), JSON.stringify(run([syncRatio, updatesPerSecond])));
      writeFileSync(join(dir, 'b.json'), JSON.stringify(run([{ ...syncRatio, value: 1.3 }])));
      await benchReportCommand(() => undefined).parseAsync(['merge', join(dir, 'a.json'), join(dir, 'b.json'), '--out', join(dir, 'out.json')], { from: 'user' });
      expect(readBenchRun(join(dir, 'out.json')).figures.map((f) => [f.name, f.value])).toEqual([
        ['full sync / bare restore', 1.3],
        ['watch updates', 20_000],
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
