// The contract suite as a platform team runs it: from the installed @kube-router/controller, against the team's own
// plugin on the embedded API server of the installed @kube-router/testkit, whose faults break the plugin's API calls.
import { ServiceRegistry } from '@kube-router/controller';
import { runControllerContractSuite } from '@kube-router/controller/contract';
import { HealthRegistry } from '@kube-router/healthcheck';
import { createKubeContext, KubeServices, loadKubeConfig } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import { startApiServer } from '@kube-router/testkit';
import { pino } from 'pino';
import { namespaceCountPlugin } from './namespace-count.js';

runControllerContractSuite({
  name: 'namespace-count',
  plugin: { plugin: namespaceCountPlugin, validOptions: { syncPeriodMs: 60_000 } },
  hangBoundMs: 2_500,
  async setup() {
    const server = await startApiServer({ port: 0 });
    const kubeconfig = await server.writeKubeconfig();
    const logger = pino({ level: 'silent' });
    const metrics = new AgentMetrics({ collectDefaultMetrics: false });
    const health = new HealthRegistry({ defaultGraceMs: 5_000 });
    const kube = createKubeContext({ kubeConfig: loadKubeConfig({ kubeconfig, env: {} }), nodeName: 'consumer', logger, metrics });
    const services = new ServiceRegistry();
    services.provide(KubeServices, kube);
    const controller = await namespaceCountPlugin.create(
      { nodeName: 'consumer', logger, metrics, health, services },
      namespaceCountPlugin.options.parse({ syncPeriodMs: 60_000, syncTimeoutMs: 500 }),
    );
    return {
      controller,
      health,
      metrics,
      faults: {
        fail: () => server.faults.failNextRequest('list', 'namespaces', 500, 1_000),
        hang: () => server.faults.setLatency(2_000),
        heal: () => server.faults.reset(),
      },
      teardown: () => server.close(),
    };
  },
});
