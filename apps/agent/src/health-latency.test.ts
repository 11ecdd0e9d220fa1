import { afterEach, describe, expect, it } from 'vitest';
import { createAgent, type Agent } from './agent.js';
import type { SyncContext } from '@kube-router/controller';
import { renderBlocking, renderInWorker, renderYielding } from './testing/cpu-render.js';
import { pollHealth, percentile, type ProbeResult } from './testing/health-poller.js';
import { testPlugin } from './testing/test-plugins.js';
import { memoryLogger, sleep, waitFor } from './testing/support.js';

// The kubelet's probe timeout is 1 s by default; the agent's own budget is a tenth of that.
const BUDGET_MS = 100;
const RENDER_MS = 2_500;

const running: Agent[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((agent) => agent.stop()));
});

/** Starts an agent whose only controller renders for RENDER_MS in its first sync, and probes /healthz meanwhile. */
async function probeDuringRender(render: (ctx: SyncContext) => Promise<unknown>): Promise<{
  answers: ProbeResult[];
  renderMs: number;
}> {
  let renderStarted = 0;
  let renderMs = 0;
  let go!: () => void;
  const probing = new Promise<void>((resolve) => (go = resolve));
  const agent = await createAgent({
    plugins: [
      {
        plugin: testPlugin({
          name: 'renderer',
          syncPeriodMs: 60_000,
          syncTimeoutMs: 0,
          sync: async (ctx) => {
            // Wait for the poller, so that even a render that blocks the event loop is probed throughout.
            await probing;
            renderStarted = performance.now();
            await render(ctx);
            renderMs = performance.now() - renderStarted;
          },
        }),
      },
    ],
    options: {
      nodeName: 'node-a',
      health: { addr: '127.0.0.1', port: 0 },
      metrics: false,
      collectDefaultMetrics: false,
    },
    logger: memoryLogger('info').logger,
  });
  running.push(agent);
  await agent.start();
  const poll = pollHealth(`${agent.healthUrl}/healthz`, { intervalMs: 50, durationMs: RENDER_MS });
  await poll.ready;
  await sleep(100);
  go();
  const answers = await poll.results;
  await waitFor('the render to end', () => renderMs > 0, RENDER_MS + 5_000);
  return { answers, renderMs };
}

function describeSlowest(answers: ProbeResult[]): string {
  const latencies = answers.map((a) => a.latencyMs);
  return `p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms, max ${Math.max(...latencies).toFixed(1)} ms`;
}

// A render that blocks the loop misses the budget on every attempt. A retry only absorbs the machine itself being
// starved (this 2-core VM shares its cores with other test processes, and the hypervisor steals time), which can
// stall any thread for a moment whatever the agent does.
const STARVATION_RETRIES = { retry: 2 };

describe('/healthz while a controller burns CPU in a sync', () => {
  it('answers every probe within 100 ms when the render runs in a worker thread', STARVATION_RETRIES, async () => {
    const { answers, renderMs } = await probeDuringRender(({ progress, signal }) =>
      renderInWorker(RENDER_MS, { onProgress: progress, signal }),
    );
    expect(renderMs).toBeGreaterThanOrEqual(RENDER_MS - 50);
    expect(answers.length).toBeGreaterThan(30);
    expect(answers.filter((a) => a.status !== 200)).toEqual([]);
    expect(answers.filter((a) => a.latencyMs > BUDGET_MS), describeSlowest(answers)).toEqual([]);
  });

  it('answers every probe within 100 ms when the render yields every 2 ms', STARVATION_RETRIES, async () => {
    const { answers, renderMs } = await probeDuringRender(({ progress }) => renderYielding(RENDER_MS, 2, progress));
    expect(renderMs).toBeGreaterThanOrEqual(RENDER_MS - 50);
    expect(answers.length).toBeGreaterThan(30);
    expect(answers.filter((a) => a.status !== 200)).toEqual([]);
    expect(answers.filter((a) => a.latencyMs > BUDGET_MS), describeSlowest(answers)).toEqual([]);
  });

  it('misses the budget when the render blocks the event loop: the probes above can fail', async () => {
    const { answers } = await probeDuringRender(async () => renderBlocking(RENDER_MS));
    const latencies = answers.map((a) => a.latencyMs);
    expect(Math.max(...latencies)).toBeGreaterThan(1_000);
  });
});
