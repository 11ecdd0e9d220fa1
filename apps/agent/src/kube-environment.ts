import type { Logger } from 'pino';
import { createKubeContext, KubeServices, loadKubeConfig, type KubeContext } from '@kube-router/kube';
import type { AgentMetrics } from '@kube-router/metrics';
import type { AgentConfig } from './flags.js';
import type { AgentEnvironment } from './run-cli.js';

/**
 * The agent's Kubernetes wiring: the client configuration (--kubeconfig, --master, in-cluster), one KubeContext that
 * every plugin shares (informers, events, leader election), its informers' readiness, and the wait for their caches
 * (--cache-sync-timeout) before the first sync. A cache that does not sync in time fails the start with the reason:
 * syncing against an empty cache would remove every rule the node has.
 */
export function kubeEnvironment(config: AgentConfig, logger: Logger, metrics: AgentMetrics): Promise<AgentEnvironment> {
  const kubeConfig = loadKubeConfig({
    ...(config.kubeconfig !== undefined && { kubeconfig: config.kubeconfig }),
    ...(config.master !== undefined && { master: config.master }),
  });
  return Promise.resolve(environmentFor(createKubeContext({ kubeConfig, nodeName: config.nodeName, logger, metrics }), config));
}

export function environmentFor(kube: KubeContext, config: Pick<AgentConfig, 'cacheSyncTimeoutMs'>): AgentEnvironment {
  return {
    services: [[KubeServices, kube]],
    readinessChecks: { informers: kube.informers.readinessCheck },
    beforeFirstSync: () => kube.informers.start({ cacheSyncTimeoutMs: config.cacheSyncTimeoutMs }),
    async close() {
      await kube.informers.stop();
      await kube.events.flush();
    },
  };
}
