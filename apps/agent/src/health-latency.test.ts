import { describe, expect, it } from 'vitest';
import { renderBlocking, renderInWorker, renderYielding } from './testing/cpu-render.js';
import { percentile, type ProbeResult } from './testing/health-poller.js';
import { probeHealthDuringRender, type Render } from './testing/render-probe.js';

// The kubelet's probe timeout is 1 s by default; the agent's own budget is a tenth of that.
const BUDGET_MS = 100;
const RENDER_MS = 2_500;

const probeDuringRender = (render: Render) => probeHealthDuringRender(render, { durationMs: RENDER_MS });

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
