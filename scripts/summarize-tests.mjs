// Adds up the vitest JSON reports of every package (written when VITEST_REPORT_DIR is set) and prints the plain
// `N passed, N failed, N skipped` line that CI reads. Failed lint/typecheck tasks count as failures too.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const [dir, nxExitCode = '0'] = process.argv.slice(2);
let passed = 0;
let failed = 0;
let skipped = 0;
let files = 0;
// CI shows only the tail of its log, so the names of what failed are printed just above the summary line.
const failures = [];
for (const name of readdirSync(dir).filter((f) => f.endsWith('.json') && !f.endsWith('.errors.json'))) {
  const report = JSON.parse(readFileSync(join(dir, name), 'utf8'));
  // Errors outside the tests (a failing beforeAll), which the JSON report has no message for: SuiteErrorsReporter's.
  const errorsFile = join(dir, name.replace(/\.json$/, '.errors.json'));
  const suiteErrors = new Map(existsSync(errorsFile) ? JSON.parse(readFileSync(errorsFile, 'utf8')).map((entry) => [entry.file, entry.errors]) : []);
  files++;
  passed += report.numPassedTests;
  failed += report.numFailedTests;
  for (const file of report.testResults) {
    const where = `${name.replace(/\.json$/, '')}: ${file.name.replace(/^.*\/(packages|apps)\//, '$1/')}`;
    for (const test of file.assertionResults.filter((a) => a.status === 'failed')) {
      failures.push(`FAILED ${where} > ${test.fullName}\n  ${firstLine(test.failureMessages)}`);
    }
    if (file.status === 'failed' && file.assertionResults.every((a) => a.status !== 'failed')) {
      failures.push(`FAILED ${where} did not load or a hook failed\n  ${firstLine([file.message ?? '', ...(suiteErrors.get(file.name) ?? [])])}`);
    }
  }
  skipped += report.numPendingTests + (report.numTodoTests ?? 0);
  // A suite that failed to load (a syntax error, a failing beforeAll) has no failed test but did fail.
  failed += report.testResults.filter((r) => r.status === 'failed' && r.assertionResults.every((a) => a.status !== 'failed')).length;
}
if (files === 0 || (Number(nxExitCode) !== 0 && failed === 0)) failed += 1;
for (const failure of failures) console.log(failure);
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed > 0 ? 1 : 0);

function firstLine(messages) {
  const text = (messages ?? []).join('\n').replace(/\x1b\[[0-9;]*m/g, '');
  return text.split('\n').find((line) => line.trim() !== '')?.trim().slice(0, 400) ?? '(no message)';
}
