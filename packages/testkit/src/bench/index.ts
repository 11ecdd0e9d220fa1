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
