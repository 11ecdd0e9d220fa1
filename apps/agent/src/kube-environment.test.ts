import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { createKubeContext, loadKubeConfig } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import { startApiServer } from '@kube-router/testkit';
import { environmentFor } from './kube-environment.js';
import { parseFlags } from './parse-flags.js';

describe('environmentFor', () => {
  it('waits for the caches with --cache-sync-timeout=720h instead of failing at once with a false timeout', async () => {
    const server = await startApiServer({ port: 0 });
    try {
      const flags = parseFlags(['--cache-sync-timeout=720h'], { NODE_NAME: 'tagd-node' });
      if (!flags.ok) throw new Error(flags.stderr);
      const kubeconfig = await server.writeKubeconfig();
      const kube = createKubeContext({
        kubeConfig: loadKubeConfig({ kubeconfig, env: {} }),
        nodeName: 'tagd-node',
        logger: pino({ level: 'silent' }),
        metrics: new AgentMetrics({ collectDefaultMetrics: false }),
      });
      kube.informers.pods();
      const environment = environmentFor(kube, flags.config);
      // Before: a 720h timer fired after 1 ms and the start failed, "did not sync within 2592000000 ms".
      await expect(environment.beforeFirstSync?.()).resolves.toBeUndefined();
      await environment.close?.();
    } finally {
      await server.close();
    }
  });
});
