/**
 * /healthz latency while a controller renders for seconds (CPU-bound), against an idle agent, measured from a
 * separate thread in one run. Prints p50/p99 per scenario and their ratio to idle; it never passes or fails.
 *
 *   npm run bench -w @kube-router/agent
 */
import { reportBench } from '@kube-router/testkit/bench';
import { renderBlocking, renderInWorker, renderYielding } from '../src/testing/cpu-render.js';
import { percentile } from '../src/testing/health-poller.js';
import { probeHealthDuringRender, type Render } from '../src/testing/render-probe.js';

const RENDER_MS = 3_000;
const INTERVAL_MS = 50;

async function measure(render: Render | undefined): Promise<number[]> {
  const { answers } = await probeHealthDuringRender(render, { durationMs: RENDER_MS, intervalMs: INTERVAL_MS });
  const failed = answers.filter((a) => a.status !== 200).length;
  if (failed > 0) console.warn(`  ${failed} of ${answers.length} probes did not answer 200`);
  return answers.map((a) => a.latencyMs);
}

const scenarios: Array<[string, Render | undefined]> = [
  ['idle', undefined],
  ['render in a worker thread', ({ progress, signal }) => renderInWorker(RENDER_MS, { onProgress: progress, signal })],
  ['render on the loop, yielding every 2 ms', ({ progress }) => renderYielding(RENDER_MS, 2, progress)],
  ['render blocking the loop (anti-pattern)', async () => renderBlocking(RENDER_MS)],
];

console.log(`/healthz latency, probed every ${INTERVAL_MS} ms over a ${RENDER_MS / 1000} s render, new connection per probe`);
const rows: Array<{ name: string; p50: number; p99: number; max: number; probes: number }> = [];
for (const [name, render] of scenarios) {
  const latencies = await measure(render);
  rows.push({
    name,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: Math.max(...latencies),
    probes: latencies.length,
  });
}
const idle = rows[0]!;
const width = Math.max(...rows.map((r) => r.name.length));
console.log(`${'scenario'.padEnd(width)}  probes     p50 ms     p99 ms     max ms  p50/idle  p99/idle`);
for (const row of rows) {
  console.log(
    `${row.name.padEnd(width)}  ${String(row.probes).padStart(6)}  ${row.p50.toFixed(2).padStart(9)}  ${row.p99
      .toFixed(2)
      .padStart(9)}  ${row.max.toFixed(2).padStart(9)}  ${(row.p50 / idle.p50).toFixed(1).padStart(7)}x  ${(
      row.p99 / idle.p99
    )
      .toFixed(1)
      .padStart(7)}x`,
  );
}
const byName = new Map(rows.map((row) => [row.name, row]));
const worker = byName.get('render in a worker thread')!;
const yielding = byName.get('render on the loop, yielding every 2 ms')!;
reportBench({
  plugin: 'agent',
  figures: [
    { name: '/healthz p99, render in a worker / idle', value: worker.p99 / idle.p99, unit: 'x', better: 'lower' },
    { name: '/healthz p99, render yielding every 2 ms / idle', value: yielding.p99 / idle.p99, unit: 'x', better: 'lower' },
    { name: '/healthz p99 idle', value: idle.p99, unit: 'ms', better: 'lower' },
  ],
});
