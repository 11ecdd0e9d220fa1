import { runControllerContractSuite } from '@kube-router/controller/contract';
import { lballocPlugin } from './plugin.js';
import { createTestAgent, startCluster, waitFor } from './testing/harness.js';

// The faults break the allocator's real dependency, the API server: lists answer 500, or every answer is delayed
// past the sync timeout. A follower never calls the API, so each fault first waits for this replica to lead.
runControllerContractSuite({
  name: 'lballoc',
  plugin: { plugin: lballocPlugin, validOptions: { ranges: ['10.90.0.0/28'] } },
  hangBoundMs: 2_500,
  async setup({ defer }) {
    const { server, kubeconfig } = await startCluster();
    // Closed after the test, and also if the rest of the setup fails.
    defer(() => server.close());
    const agent = createTestAgent(kubeconfig, 'contract', { ranges: ['10.90.0.0/28'], syncTimeoutMs: 500 });
    await agent.kube.informers.start({ cacheSyncTimeoutMs: 10_000 });
    const lead = () => waitFor('leadership', () => agent.isLeader());
    return {
      controller: agent.controller,
      health: agent.health,
      metrics: agent.metrics,
      faults: {
        async fail() {
          await lead();
          server.faults.failNextRequest('list', 'services', 500, 1_000);
        },
        async hang() {
          await lead();
          server.faults.setLatency(2_000);
        },
        heal: () => server.faults.reset(),
      },
      async teardown() {
        await agent.kube.informers.stop();
      },
    };
  },
});
