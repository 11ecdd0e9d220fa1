#!/usr/bin/env -S npx tsx --conditions=@kube-router/source
// Runs every package's bench into one report, or compares a run with the baseline. Usage: npm run bench -- --help
import { benchReportCommand } from '../src/bench/cli.js';

try {
  await benchReportCommand().parseAsync(process.argv);
} catch (error) {
  // A missing or malformed run or goals file: its message names the file and what is wrong, no stack needed.
  console.error(`bench-report: ${(error as Error).message}`);
  process.exitCode = 1;
}
