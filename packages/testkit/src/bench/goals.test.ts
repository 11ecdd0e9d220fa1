import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { benchReportCommand } from './cli.js';
import type { BenchGoals } from './goals.js';
import { evaluateBenchGoals, formatBenchGoals, formatBenchGoalsMarkdown, parseBenchGoals } from './goals.js';
import type { BenchRecord } from './report.js';
import { benchRun } from './report.js';

const figures: BenchRecord[] = [
  { plugin: 'agent', bench: 'scale', name: '1k: label change -> enforced', value: 40, unit: 'ms', better: 'lower' },
  { plugin: 'agent', bench: 'scale', name: '10k: label change -> enforced', value: 60, unit: 'ms', better: 'lower' },
  { plugin: 'agent', bench: 'scale', name: '10k: RSS after first sync', value: 140, unit: 'MiB', better: 'lower' },
  { plugin: 'kube', bench: 'informer', name: 'watch updates delivered', value: 5843, unit: '/s', better: 'higher' },
];

const goals: BenchGoals = {
  version: 1,
  goals: [
    {
      goal: 'label change within 50 ms',
      checks: [{ label: '10k', figure: 'agent/10k: label change -> enforced', atMost: 50, unit: 'ms', from: 'npm run bench' }],
      cause: 'the kernel writes',
    },
    { goal: 'RSS at most 150 MiB', checks: [{ figure: 'agent/10k: RSS after first sync', atMost: 150, from: 'npm run bench' }], cause: 'stale cause' },
    {
      goal: 'flat with the cluster',
      checks: [{ label: '10k / 1k', figure: 'agent/10k: label change -> enforced', over: 'agent/1k: label change -> enforced', atMost: 1.2, from: 'npm run bench' }],
    },
    { goal: 'updates per second', checks: [{ figure: 'kube/watch updates delivered', atLeast: 6000, from: 'npm run bench -- --projects=@kube-router/kube' }] },
    {
      goal: 'at 50k too',
      checks: [
        { label: '10k', figure: 'agent/10k: RSS after first sync', atMost: 150, from: 'npm run bench' },
        { label: '50k', figure: 'agent/50k: RSS after first sync', atMost: 350, unit: 'MiB', from: 'SCALE_SIZES=50000 npm run bench' },
      ],
      cause: 'not measured yet',
    },
    { goal: 'a finding', checks: [{ figure: 'kube/watch updates delivered', from: 'npm run bench' }, { label: 'why', unmeasured: 'no bench yet' }] },
  ],
};

describe('evaluateBenchGoals', () => {
  const results = evaluateBenchGoals(goals, figures);

  it('holds each figure against its threshold in the direction given, a cause only on a miss', () => {
    expect(results[0]).toEqual({
      goal: 'label change within 50 ms',
      verdict: 'not met',
      checks: [{ label: '10k', verdict: 'missed', value: 60, unit: 'ms', target: '≤ 50 ms' }],
      cause: 'the kernel writes',
    });
    expect(results[1]).toMatchObject({ verdict: 'met', checks: [{ label: 'agent/10k: RSS after first sync', verdict: 'met', value: 140 }] });
    expect(results[1]).not.toHaveProperty('cause');
    expect(results[3]).toMatchObject({ verdict: 'not met', checks: [{ verdict: 'missed', target: '≥ 6,000 /s' }] });
    // A figure on its threshold meets it, either way.
    const onTheLine = (check: object) => evaluateBenchGoals({ version: 1, goals: [{ goal: 'g', checks: [{ figure: 'kube/watch updates delivered', from: 'x', ...check }] }] }, figures)[0]?.verdict;
    expect([onTheLine({ atMost: 5843 }), onTheLine({ atLeast: 5843 }), onTheLine({ atMost: 5842 }), onTheLine({ atLeast: 5844 })]).toEqual(['met', 'met', 'not met', 'not met']);
  });

  it('divides two figures of the same run into a ratio', () => {
    expect(results[2]).toMatchObject({ verdict: 'not met', checks: [{ label: '10k / 1k', verdict: 'missed', value: 1.5, unit: 'x', target: '≤ 1.20x' }] });
    const flat = evaluateBenchGoals(goals, figures.map((figure) => (figure.name.startsWith('10k: label') ? { ...figure, value: 44 } : figure)));
    expect(flat[2]?.checks[0]).toMatchObject({ verdict: 'met', value: 1.1 });
  });

  it('says which figures a run lacks and which bench gives them, and does not call the goal met', () => {
    expect(results[4]).toMatchObject({
      verdict: 'not measured',
      checks: [
        { label: '10k', verdict: 'met' },
        { label: '50k', verdict: 'missing', target: '≤ 350 MiB', note: 'agent/50k: RSS after first sync not in this run; from: SCALE_SIZES=50000 npm run bench' },
      ],
      cause: 'not measured yet',
    });
    const withoutBase = evaluateBenchGoals(goals, figures.filter((figure) => !figure.name.startsWith('1k:')));
    expect(withoutBase[2]?.checks[0]).toMatchObject({ verdict: 'missing', target: '≤ 1.20x' });
    expect(withoutBase[2]?.checks[0]?.note).toMatch(/^agent\/1k: label change -> enforced not in this run/);
  });

  it('shows a figure without a threshold, and a part no bench measures', () => {
    expect(results[5]).toMatchObject({
      verdict: 'not measured',
      checks: [
        { verdict: 'figure', value: 5843, target: '' },
        { label: 'why', verdict: 'unmeasured', note: 'no bench yet' },
      ],
    });
  });

  it('does not hold a figure against a threshold of another unit', () => {
    const seconds = evaluateBenchGoals(
      { version: 1, goals: [{ goal: 'g', checks: [{ figure: 'agent/10k: label change -> enforced', atMost: 1, unit: 's', from: 'x' }] }] },
      figures,
    );
    expect(seconds[0]).toMatchObject({ verdict: 'not measured', checks: [{ verdict: 'missing', note: 'the figure is in ms, the goal in s: fix the goal' }] });
  });

  it('prints every goal with its verdict, each check and the cause of a miss, as text and as Markdown', () => {
    const text = formatBenchGoals(results).join('\n');
    expect(text).toMatch(/^goals: 1 of 6 met/);
    expect(text).toMatch(/1\. label change within 50 ms: NOT MET\n\s+10k\s+60 ms\s+≤ 50 ms\s+not met\n\s+cause: the kernel writes/);
    expect(text).toMatch(/50k\s+not in this run\s+≤ 350 MiB\s+not measured\n\s+agent\/50k: RSS after first sync not in this run; from: SCALE_SIZES=50000/);
    const markdown = formatBenchGoalsMarkdown(results);
    expect(markdown.slice(0, 2)).toEqual(['| goal | this run | met | measured cause of a miss |', '|---|---|---|---|']);
    expect(markdown[2]).toBe('| label change within 50 ms | 10k: 60 ms (≤ 50 ms) ✗ | no | the kernel writes |');
    expect(markdown[3]).toBe('| RSS at most 150 MiB | agent/10k: RSS after first sync: 140 MiB (≤ 150 MiB) ✓ | yes |  |');
    expect(markdown[7]).toContain('why: no bench (no bench yet)');
    // The figures a run lacks are grouped by the bench that gives them, after the figures it has.
    expect(markdown[6]).toBe('| at 50k too | 10k: 140 MiB (≤ 150 MiB) ✓; 50k: not in this run (`SCALE_SIZES=50000 npm run bench`) | not measured | not measured yet |');
    const twoMissing = evaluateBenchGoals(goals, figures.filter((figure) => figure.plugin !== 'agent'));
    expect(formatBenchGoalsMarkdown(twoMissing)[6]).toContain('| 10k: not in this run (`npm run bench`); 50k: not in this run (`SCALE_SIZES=50000 npm run bench`) |');
    expect(formatBenchGoalsMarkdown(twoMissing)[4]).toContain('| 10k / 1k: not in this run (`npm run bench`) |');
  });
});

describe('parseBenchGoals', () => {
  const parse = (value: unknown) => () => parseBenchGoals(JSON.stringify(value), 'goals.json');
  const goal = (check: object) => ({ version: 1, goals: [{ goal: 'g', checks: [check] }] });

  it('accepts a goals file and refuses one with a check that cannot be evaluated, naming the goal and check', () => {
    expect(parseBenchGoals(JSON.stringify(goals)).goals).toHaveLength(6);
    expect(() => parseBenchGoals('{', 'goals.json')).toThrow(/^goals.json: /);
    expect(parse({ goals: [] })).toThrow(/not a bench goals file/);
    expect(parse({ version: 1, goals: [{ goal: 'g', checks: [] }] })).toThrow(/goal 1: checks must list at least one check/);
    expect(parse(goal({ atMost: 1, from: 'x' }))).toThrow(/goal 1 \("g"\) check 1: a check needs a figure/);
    expect(parse(goal({ figure: 'no-plugin', from: 'x' }))).toThrow(/is not plugin\/name/);
    expect(parse(goal({ figure: 'a/b', atMost: 1, atLeast: 0, from: 'x' }))).toThrow(/not both/);
    expect(parse(goal({ figure: 'a/b', atMost: 'fifty', from: 'x' }))).toThrow(/atMost must be a finite number/);
    expect(parse(goal({ figure: 'a/b', atMost: 1 }))).toThrow(/from is needed/);
    expect(parse(goal({ unmeasured: 'why' }))).toThrow(/needs a label/);
    expect(parse(goal({ label: 'l', unmeasured: 'why', figure: 'a/b' }))).toThrow(/either unmeasured or names a figure/);
  });
});

describe('bench-report goals', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'bench-report-goals-'));
    process.exitCode = undefined;
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
    process.exitCode = undefined;
  });

  it("prints the goals for a saved run, as text or Markdown, and refuses a goals file that is not one", async () => {
    writeFileSync(join(dir, 'run.json'), JSON.stringify(benchRun(figures)));
    writeFileSync(join(dir, 'goals.json'), JSON.stringify(goals));
    const lines: string[] = [];
    const command = (...args: string[]) =>
      benchReportCommand((line) => lines.push(line)).parseAsync(['goals', join(dir, 'run.json'), '--goals', join(dir, 'goals.json'), ...args], { from: 'user' });
    await command();
    expect(lines[0]).toBe('goals: 1 of 6 met');
    lines.length = 0;
    await command('--markdown');
    expect(lines[0]).toBe('| goal | this run | met | measured cause of a miss |');
    writeFileSync(join(dir, 'goals.json'), JSON.stringify({ version: 1, goals: [{ goal: 'g', checks: [{ atMost: 1 }] }] }));
    await expect(command()).rejects.toThrow(/goals.json goal 1 \("g"\) check 1: a check needs a figure/);
  });

  it("holds the project's own bench/goals.json against its baseline", async () => {
    const lines: string[] = [];
    const root = join(import.meta.dirname, '../../../..');
    await benchReportCommand((line) => lines.push(line)).parseAsync(
      ['goals', join(root, 'bench/baseline.json'), '--goals', join(root, 'bench/goals.json')],
      { from: 'user' },
    );
    expect(lines[0]).toMatch(/^goals: \d+ of \d+ met$/);
    // Every figure a goal names in the baseline is found there, in the goal's unit.
    expect(lines.join('\n')).not.toContain('fix the goal');
  });
});
