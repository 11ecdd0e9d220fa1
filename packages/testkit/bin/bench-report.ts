#!/usr/bin/env -S npx tsx --conditions=@kube-router/source
// Runs every package's bench into one report, or compares a run with the baseline. Usage: npm run bench -- --help
import { benchReportCommand } from '../src/bench/cli.js';

await benchReportCommand().parseAsync(process.argv);
