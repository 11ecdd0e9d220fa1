import type { SyncContext } from '@kube-router/controller';
import { createAgent } from '../agent.js';
import { pollHealth, type ProbeResult } from './health-poller.js';
import { captureLogs, sleep, waitFor } from './support.js';
import { testPlugin } from './test-plugins.js';

export type Render = (ctx: SyncContext) => Promise<unknown>;

/**
 * Starts an agent whose only controller runs `render` in its first sync (nothing, for an idle agent), probes /healthz
 * every `intervalMs` for `durationMs` from a separate thread meanwhile, and stops the agent. The render waits for the
 * poller to be running, so that even a render that blocks the event loop is probed throughout.
 */
export async function probeHealthDuringRender(
  render: Render | undefined,
  options: { durationMs: number; intervalMs?: number },
): Promise<{ answers: ProbeResult[]; renderMs: number }> {
  let renderMs = 0;
  let rendered = false;
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
            const started = performance.now();
            await render?.(ctx);
            renderMs = performance.now() - started;
            rendered = true;
          },
        }),
      },
    ],
    options: { nodeName: 'node-a', health: { addr: '127.0.0.1', port: 0 }, metrics: false, collectDefaultMetrics: false },
    logger: captureLogs('warn').logger,
  });
  await agent.start();
  try {
    const poll = pollHealth(`${agent.healthUrl}/healthz`, { intervalMs: options.intervalMs ?? 50, durationMs: options.durationMs });
    await poll.ready;
    await sleep(100);
    go();
    const answers = await poll.results;
    await waitFor('the render to end', () => rendered, options.durationMs + 5_000);
    return { answers, renderMs };
  } finally {
    await agent.stop();
  }
}
