/**
 * A project's goals held against a bench run: each goal names the figures of a run that give its value (one figure,
 * or the ratio of two figures of the same run), the threshold and its direction, and the measured cause of a miss.
 * The goal list is the project's (a JSON file beside its baseline, e.g. `bench/goals.json`); this module only reads
 * and evaluates it, so the report can print "goal, this run's figure, met or not, why not" after every run.
 */
import { readFileSync } from 'node:fs';
import type { BenchRecord } from './report.js';
import { RATIO_UNIT, figureKey, formatValue } from './report.js';

/** One measurement of a goal: a figure (or a ratio of two) against a threshold, or a part no bench measures yet. */
export interface BenchGoalCheck {
  /** What this check measures, e.g. `50k pods, iptables`; the figure's key when left out. */
  label?: string;
  /** `plugin/name` of the figure, as `figureKey` gives it. */
  figure?: string;
  /** `plugin/name` of a second figure of the same run: the check's value is then `figure / over`, a ratio. */
  over?: string;
  /** The value must be at most this (lower is better). */
  atMost?: number;
  /** The value must be at least this (higher is better). */
  atLeast?: number;
  /** The threshold's unit, shown when the run lacks the figure and checked against the figure's when it has it. */
  unit?: string;
  /** How to get the figure when a run lacks it: the bench command, or why no bench reports it yet. */
  from?: string;
  /** Instead of a figure: why this part of the goal is not measured by any bench. */
  unmeasured?: string;
}

export interface BenchGoal {
  /** The goal as the issue states it. */
  goal: string;
  checks: BenchGoalCheck[];
  /** The measured cause of a miss, printed when the goal is not met. */
  cause?: string;
}

export interface BenchGoals {
  version: 1;
  goals: BenchGoal[];
}

/**
 * - `met` / `missed`: the figure was in the run, within or beyond the threshold;
 * - `figure`: in the run, a figure shown for the goal with no threshold (a finding, not a pass/fail);
 * - `missing`: not in the run (a bench not run or failed), or in another unit than the goal's;
 * - `unmeasured`: no bench reports it (the goal file says why).
 */
export type CheckVerdict = 'met' | 'missed' | 'figure' | 'missing' | 'unmeasured';

export interface BenchCheckResult {
  label: string;
  verdict: CheckVerdict;
  value?: number;
  unit?: string;
  /** `≤ 50 ms`, `≥ 1,000 /s`, or empty for a figure without a threshold. */
  target: string;
  /** For a check without a value: what the run lacks and how to get it, or why no bench measures it. */
  note?: string;
  /** For a figure the run lacks: the bench command that reports it. */
  from?: string;
}

/** `not measured` when no check missed but some are not in the run; `met` needs every check in the run and met. */
export type GoalVerdict = 'met' | 'not met' | 'not measured';

export interface BenchGoalResult {
  goal: string;
  verdict: GoalVerdict;
  checks: BenchCheckResult[];
  /** The goal's measured cause, only when the goal is not met. */
  cause?: string;
}

function fail(where: string, message: string): never {
  throw new Error(`${where}: ${message}`);
}

function validCheck(where: string, check: BenchGoalCheck): void {
  if (check === null || typeof check !== 'object') fail(where, 'a check must be an object');
  for (const key of ['label', 'figure', 'over', 'from', 'unmeasured', 'unit'] as const) {
    if (check[key] !== undefined && (typeof check[key] !== 'string' || !check[key].trim())) fail(where, `${key} must be a non-empty string`);
  }
  for (const key of ['atMost', 'atLeast'] as const) {
    if (check[key] !== undefined && !Number.isFinite(check[key])) fail(where, `${key} must be a finite number`);
  }
  if (check.unmeasured !== undefined) {
    if (check.figure !== undefined || check.over !== undefined) fail(where, 'a check is either unmeasured or names a figure, not both');
    if (check.label === undefined) fail(where, 'an unmeasured check needs a label saying what it would measure');
    return;
  }
  if (check.figure === undefined) fail(where, 'a check needs a figure (plugin/name) or unmeasured (why no bench gives it)');
  if (!check.figure.includes('/')) fail(where, `figure "${check.figure}" is not plugin/name`);
  if (check.over !== undefined && !check.over.includes('/')) fail(where, `over "${check.over}" is not plugin/name`);
  if (check.atMost !== undefined && check.atLeast !== undefined) fail(where, 'give atMost or atLeast, not both');
  if (check.from === undefined) fail(where, 'from is needed: the bench command that reports the figure');
}

/** Checks a goals file's shape so a hand-edited one fails with the goal and check it is about. */
export function parseBenchGoals(text: string, source = 'goals'): BenchGoals {
  let parsed: BenchGoals;
  try {
    parsed = JSON.parse(text) as BenchGoals;
  } catch (error) {
    throw new Error(`${source}: ${(error as Error).message}`, { cause: error });
  }
  if (parsed?.version !== 1 || !Array.isArray(parsed.goals)) fail(source, 'not a bench goals file (version 1 with goals)');
  parsed.goals.forEach((goal, index) => {
    const where = `${source} goal ${index + 1}`;
    if (goal === null || typeof goal !== 'object') fail(where, 'a goal must be an object');
    if (typeof goal.goal !== 'string' || !goal.goal.trim()) fail(where, 'goal (the goal as stated) must be a non-empty string');
    if (goal.cause !== undefined && (typeof goal.cause !== 'string' || !goal.cause.trim())) fail(where, 'cause must be a non-empty string');
    if (!Array.isArray(goal.checks) || goal.checks.length === 0) fail(where, 'checks must list at least one check');
    goal.checks.forEach((check, checkIndex) => validCheck(`${where} ("${goal.goal}") check ${checkIndex + 1}`, check));
  });
  return parsed;
}

export function readBenchGoals(file: string): BenchGoals {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new Error(`${file}: ${(error as Error).message}`, { cause: error });
  }
  return parseBenchGoals(text, file);
}

function targetOf(check: BenchGoalCheck, unit: string): string {
  const suffix = unit === RATIO_UNIT ? 'x' : ` ${unit}`;
  if (check.atMost !== undefined) return `≤ ${formatValue(check.atMost)}${suffix}`;
  if (check.atLeast !== undefined) return `≥ ${formatValue(check.atLeast)}${suffix}`;
  return '';
}

function evaluateCheck(check: BenchGoalCheck, byKey: ReadonlyMap<string, BenchRecord>): BenchCheckResult {
  const label = check.label ?? (check.over ? `${check.figure} / ${check.over}` : check.figure!);
  if (check.unmeasured !== undefined) return { label, verdict: 'unmeasured', target: targetOf(check, check.unit ?? ''), note: check.unmeasured };
  const figure = byKey.get(check.figure!);
  const over = check.over === undefined ? undefined : byKey.get(check.over);
  // A ratio of two figures of one unit is a plain ratio; figures of two units divide into a unit of both.
  const measuredUnit = check.over === undefined ? figure?.unit : figure && over ? (figure.unit === over.unit ? RATIO_UNIT : `${figure.unit}/${over.unit}`) : undefined;
  const unit = check.unit ?? measuredUnit ?? (check.over === undefined ? '' : RATIO_UNIT);
  const target = targetOf(check, unit);
  const absent = [check.figure!, ...(check.over === undefined ? [] : [check.over])].filter((key) => !byKey.has(key));
  if (!figure || (check.over !== undefined && !over)) {
    return { label, verdict: 'missing', target, note: `${absent.join(' and ')} not in this run; from: ${check.from}`, from: check.from! };
  }
  if (measuredUnit !== undefined && measuredUnit !== unit) {
    return { label, verdict: 'missing', target, note: `the figure is in ${measuredUnit}, the goal in ${unit}: fix the goal` };
  }
  const value = over ? figure.value / over.value : figure.value;
  if (!Number.isFinite(value)) return { label, verdict: 'missing', target, note: `${check.figure} / ${check.over} is not a number (divides by 0)` };
  let verdict: CheckVerdict = 'figure';
  if (check.atMost !== undefined) verdict = value <= check.atMost ? 'met' : 'missed';
  if (check.atLeast !== undefined) verdict = value >= check.atLeast ? 'met' : 'missed';
  return { label, verdict, value, unit, target };
}

/** Holds every goal against the figures of one run (a figure is found by its `plugin/name` key). */
export function evaluateBenchGoals(goals: BenchGoals, figures: readonly BenchRecord[]): BenchGoalResult[] {
  const byKey = new Map(figures.map((figure) => [figureKey(figure), figure]));
  return goals.goals.map((goal) => {
    const checks = goal.checks.map((check) => evaluateCheck(check, byKey));
    const verdict: GoalVerdict = checks.some((check) => check.verdict === 'missed')
      ? 'not met'
      : checks.some((check) => check.verdict === 'missing' || check.verdict === 'unmeasured')
        ? 'not measured'
        : 'met';
    return { goal: goal.goal, verdict, checks, ...(verdict !== 'met' && goal.cause !== undefined && { cause: goal.cause }) };
  });
}

function valueText(check: BenchCheckResult): string {
  if (check.verdict === 'unmeasured') return 'no bench';
  if (check.value === undefined) return 'not in this run';
  return check.unit === RATIO_UNIT ? `${formatValue(check.value)}x` : `${formatValue(check.value)} ${check.unit}`;
}

const checkVerdictText: Record<CheckVerdict, string> = { met: 'met', missed: 'not met', figure: '', missing: 'not measured', unmeasured: 'not measured' };

/** The goals as text for a terminal: per goal a line with its verdict, one aligned line per check, then the cause. */
export function formatBenchGoals(results: readonly BenchGoalResult[]): string[] {
  const met = results.filter((result) => result.verdict === 'met').length;
  const lines = [`goals: ${met} of ${results.length} met`];
  const labelWidth = Math.max(0, ...results.flatMap((result) => result.checks.map((check) => check.label.length)));
  const valueWidth = Math.max(0, ...results.flatMap((result) => result.checks.map((check) => valueText(check).length)));
  const targetWidth = Math.max(0, ...results.flatMap((result) => result.checks.map((check) => check.target.length)));
  results.forEach((result, index) => {
    lines.push('', `${index + 1}. ${result.goal}: ${result.verdict.toUpperCase()}`);
    for (const check of result.checks) {
      const cells = [check.label.padEnd(labelWidth), valueText(check).padStart(valueWidth), check.target.padEnd(targetWidth), checkVerdictText[check.verdict]];
      lines.push(`   ${cells.join('  ').trimEnd()}`);
      if (check.note) lines.push(`     ${check.note}`);
    }
    if (result.cause) lines.push(`   cause: ${result.cause}`);
  });
  return lines;
}

function markdownCell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

/** The goals as one Markdown table (a row per goal) for the docs: goal, this run's figures, met, cause of a miss. */
export function formatBenchGoalsMarkdown(results: readonly BenchGoalResult[]): string[] {
  const verdict: Record<GoalVerdict, string> = { met: 'yes', 'not met': 'no', 'not measured': 'not measured' };
  const checkText = (check: BenchCheckResult) => {
    if (check.verdict === 'unmeasured') return `${check.label}: no bench (${check.note})`;
    if (check.verdict === 'missing') return `${check.label}: ${check.note}`;
    const mark = check.verdict === 'met' ? ' ✓' : check.verdict === 'missed' ? ' ✗' : '';
    return `${check.label}: ${valueText(check)}${check.target ? ` (${check.target})` : ''}${mark}`;
  };
  // Checks the run lacks, one entry per bench command that would give them, after the figures it has.
  const cellOf = (checks: readonly BenchCheckResult[]) => {
    const absent = new Map<string, string[]>();
    for (const check of checks) if (check.from !== undefined) absent.set(check.from, [...(absent.get(check.from) ?? []), check.label]);
    return [
      ...checks.filter((check) => check.from === undefined).map(checkText),
      ...[...absent].map(([from, labels]) => `${labels.join(', ')}: not in this run (\`${from}\`)`),
    ].join('; ');
  };
  return [
    '| goal | this run | met | measured cause of a miss |',
    '|---|---|---|---|',
    ...results.map((result) =>
      `| ${[result.goal, cellOf(result.checks), verdict[result.verdict], result.cause ?? ''].map(markdownCell).join(' | ')} |`,
    ),
  ];
}
