import { afterEach, describe, expect, it } from 'vitest';
import { KubeServices } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import { startApiServer, type ApiServer } from '@kube-router/testkit';
import { createAgent, type Agent } from './agent.js';
import { connectToCluster, type ClusterConnection } from './cluster.js';
import { get, captureLogs } from './testing/support.js';
import { testPlugin } from './testing/test-plugins.js';

describe('connectToCluster', () => {
  let server: ApiServer | undefined;
  let agent: Agent | undefined;
  let cluster: ClusterConnection | undefined;
  afterEach(async () => {
    await agent?.stop();
    await cluster?.close();
    await server?.close();
    agent = cluster = server = undefined;
  });

  it('spreads into createAgent: KubeServices for plugins, informer readiness, the cache wait before the first sync', async () => {
    server = await startApiServer({ port: 0 });
    const { logger } = captureLogs();
    const metrics = new AgentMetrics({ collectDefaultMetrics: false });
    cluster = connectToCluster({ nodeName: 'node-a', kubeconfig: await server.writeKubeconfig(), logger, metrics });
    let namespacesAtFirstSync: number | undefined;
    const plugin = testPlugin({
      name: 'reader',
      onCreate: (services) => services.get(KubeServices).informers.lister('namespaces'),
      sync: async () => {
        namespacesAtFirstSync ??= cluster?.kube.informers.lister('namespaces').list().length;
      },
    });
    agent = await createAgent({ ...cluster, plugins: [{ plugin }], options: { nodeName: 'node-a', health: { addr: '127.0.0.1', port: 0 } } });
    expect(agent.metrics).toBe(metrics);
    expect(agent.services.get(KubeServices)).toBe(cluster.kube);
    await agent.start();
    const ready = await get(`${agent.healthUrl}/readyz?verbose`);
    expect(ready.body).toContain('[+]informers ok');
    // The first sync ran against a synced cache: the embedded server's default namespace was in it.
    expect(namespacesAtFirstSync).toBeGreaterThan(0);
  });

  it('fails without any client configuration, naming what it looked for', () => {
    const saved = process.env.KUBECONFIG;
    delete process.env.KUBECONFIG;
    try {
      expect(() => connectToCluster({ nodeName: 'node-a' })).toThrow(/no Kubernetes client configuration/);
    } finally {
      if (saved !== undefined) process.env.KUBECONFIG = saved;
    }
  });
});
