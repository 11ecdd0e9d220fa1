import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgent, type Agent } from './agent.js';
import { testPlugin } from './testing/test-plugins.js';
import { get, hasTool, captureLogs, run, waitFor } from './testing/support.js';

/** Keeps only the metric families whose name starts with `prefix` (HELP, TYPE and samples). */
function familiesWithPrefix(exposition: string, prefix: string): string {
  return exposition
    .split('\n')
    .filter((line) => {
      const name = line.startsWith('# ') ? line.split(' ')[2] : line.split(/[{ ]/)[0];
      return name?.startsWith(prefix);
    })
    .join('\n')
    .concat('\n');
}

describe.skipIf(!hasTool('promtool'))('promtool check metrics (skipped when promtool is missing: apt-get install prometheus)', () => {
  let agent: Agent;
  let exposition: string;

  beforeAll(async () => {
    agent = await createAgent({
      plugins: [
        { plugin: testPlugin({ name: 'good' }) },
        {
          plugin: testPlugin({
            name: 'bad',
            sync: async () => {
              throw new Error('always');
            },
          }),
        },
      ],
      options: { nodeName: 'node-a', health: false, metrics: { addr: '127.0.0.1', port: 0 } },
      logger: captureLogs('info').logger,
    });
    await agent.start();
    await waitFor('both first syncs', () => agent.health.readinessChecks().every((check) => check.ok));
    exposition = (await get(agent.metricsUrl!)).body;
  });

  afterAll(async () => {
    await agent?.stop();
  });

  it("finds no problem in the agent's own metric families", async () => {
    const ours = familiesWithPrefix(exposition, 'kube_router_');
    expect(ours).toContain('kube_router_controller_sync_last_success{controller="bad"} 0');
    expect(ours).toContain('kube_router_controller_sync_failures_total{controller="bad"} 1');
    expect(ours).toContain('kube_router_controller_sync_duration_seconds_bucket{le="+Inf",controller="good",result="success"} 1');
    const result = await run('promtool', ['check', 'metrics'], { input: ours });
    expect(result).toEqual({ code: 0, stdout: '', stderr: '' });
  });

  it('blames nothing of ours in the full output, default process metrics included', async () => {
    const result = await run('promtool', ['check', 'metrics'], { input: exposition });
    expect(`${result.stdout}${result.stderr}`).not.toContain('kube_router_');
  });
});
