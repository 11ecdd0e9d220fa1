/**
 * /healthz latency while a controller renders for seconds (CPU-bound), against an idle agent, measured from a
 * separate thread in one run. Prints p50/p99 per scenario and their ratio to idle; it never passes or fails.
 *
 *   npm run bench -w @kube-router/agent
 */
import type { SyncContext } from '@kube-router/controller';
import { createAgent } from '../src/agent.js';
import { renderBlocking, renderInWorker, renderYielding } from '../src/testing/cpu-render.js';
import { percentile, pollHealth } from '../src/testing/health-poller.js';
import { memoryLogger, sleep } from '../src/testing/support.js';
import { testPlugin } from '../src/testing/test-plugins.js';

const RENDER_MS = 3_000;
const INTERVAL_MS = 50;

type Render = ((ctx: SyncContext) => Promise<unknown>) | undefined;

async function measure(render: Render): Promise<number[]> {
  let go!: () => void;
  const probing = new Promise<void>((resolve) => (go = resolve));
  const agent = await createAgent({
    plugins: [
      {
        plugin: testPlugin({
          name: 'renderer',
          syncPeriodMs: 600_000,
          syncTimeoutMs: 0,
          sync: async (ctx) => {
            await probing;
            await render?.(ctx);
          },
        }),
      },
    ],
    options: { nodeName: 'bench', health: { addr: '127.0.0.1', port: 0 }, metrics: false, collectDefaultMetrics: false },
    logger: memoryLogger('warn').logger,
  });
  await agent.start();
  try {
    const poll = pollHealth(`${agent.healthUrl}/healthz`, { intervalMs: INTERVAL_MS, durationMs: RENDER_MS });
    await poll.ready;
    await sleep(100);
    go();
    const answers = await poll.results;
    const failed = answers.filter((a) => a.status !== 200).length;
    if (failed > 0) console.warn(`  ${failed} of ${answers.length} probes did not answer 200`);
    return answers.map((a) => a.latencyMs);
  } finally {
    await agent.stop();
  }
}

const scenarios: Array<[string, Render]> = [
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
