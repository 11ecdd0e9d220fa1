// Adds up the vitest JSON reports of every package (written when VITEST_REPORT_DIR is set) and prints the plain
// `N passed, N failed, N skipped` line that CI reads. Failed lint/typecheck tasks count as failures too.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const [dir, nxExitCode = '0'] = process.argv.slice(2);
let passed = 0;
let failed = 0;
let skipped = 0;
let files = 0;
for (const name of readdirSync(dir).filter((f) => f.endsWith('.json'))) {
  const report = JSON.parse(readFileSync(join(dir, name), 'utf8'));
  files++;
  passed += report.numPassedTests;
  failed += report.numFailedTests;
  skipped += report.numPendingTests + (report.numTodoTests ?? 0);
  // A suite that failed to load (a syntax error, a failing beforeAll) has no failed test but did fail.
  failed += report.testResults.filter((r) => r.status === 'failed' && r.assertionResults.every((a) => a.status !== 'failed')).length;
}
if (files === 0 || (Number(nxExitCode) !== 0 && failed === 0)) failed += 1;
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed > 0 ? 1 : 0);
