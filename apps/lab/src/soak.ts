/**
 * `npm run soak`: issue 35's soak for as long as SOAK_MINUTES says (default 30), as root: churn on a two-node lab
 * (apps/lab/src/testing/soak.ts), one progress line per round, then the figures on the last line. Exits 0 when the
 * soak held (every verdict as the policies said, the kernels back to the same state every round, the agents flat),
 * 1 with what went wrong otherwise. It takes the lab subnet 10.250.255.0/24, as the 2-minute soak of `npm test` does:
 * run one at a time.
 */
import { randomInt } from 'node:crypto';
import { Soak } from './testing/soak.js';

const minutes = Number(process.env.SOAK_MINUTES ?? '30');
if (!Number.isFinite(minutes) || minutes <= 0) {
  process.stderr.write(`SOAK_MINUTES must be a positive number of minutes, not ${JSON.stringify(process.env.SOAK_MINUTES)}\n`);
  process.exit(2);
}
if (process.getuid?.() !== 0) {
  process.stderr.write('the soak runs a lab with network namespaces: run it as root\n');
  process.exit(2);
}

const soak = new Soak({
  runId: `soak${randomInt(36 * 36).toString(36).padStart(2, '0')}`,
  subnet: 255,
  durationMs: minutes * 60_000,
  // The first minutes fill caches, compile hot code and settle the allocator: the issue asks for flat after them.
  warmupMs: Math.min(5, minutes / 4) * 60_000,
  log: (line) => process.stdout.write(`${line}\n`),
});
let code = 1;
const interrupted = new Promise<void>((resolve) => process.once('SIGINT', () => resolve()));
try {
  await Promise.race([soak.start(), interrupted]);
  const report = await Promise.race([soak.run(), interrupted.then(() => undefined)]);
  if (report) {
    for (const problem of report.problems) process.stdout.write(`problem: ${problem}\n`);
    for (const wrong of report.wrong.slice(0, 20)) process.stdout.write(`wrong verdict: ${wrong}\n`);
    code = report.problems.length === 0 && report.wrong.length === 0 && report.probeErrors.length === 0 ? 0 : 1;
    process.stdout.write(`${report.summary}\n`);
  }
} catch (error) {
  process.stderr.write(`the soak failed: ${error instanceof Error ? error.message : String(error)}\n`);
} finally {
  const stopped = await soak.stop();
  if (stopped !== 0) code = 1;
}
process.exit(code);
