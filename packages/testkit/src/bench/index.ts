export {
  BENCH_REPORT_ENV,
  RATIO_UNIT,
  benchRun,
  compareBenchReports,
  figureKey,
  formatBenchComparison,
  formatBenchTable,
  readBenchRecords,
  readBenchRun,
  reportBench,
} from './report.js';
export type {
  BenchComparison,
  BenchFigure,
  BenchRecord,
  BenchRegression,
  BenchReportInput,
  BenchRun,
  CompareBenchOptions,
  ReportBenchOptions,
} from './report.js';
export { evaluateBenchGoals, formatBenchGoals, formatBenchGoalsMarkdown, parseBenchGoals, readBenchGoals } from './goals.js';
export type { BenchCheckResult, BenchGoal, BenchGoalCheck, BenchGoalResult, BenchGoals, CheckVerdict, GoalVerdict } from './goals.js';
