import type { Logger } from 'pino';
import { MAX_TIMER_DELAY_MS } from '@kube-router/controller';
import { createKubeContext, KubeServices, loadKubeConfig, type KubeContext } from '@kube-router/kube';
import type { AgentMetrics } from '@kube-router/metrics';
import type { AgentConfig } from './config.js';
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
    // The informers wait with one setTimeout, which fires at once beyond Node's 32-bit limit (--cache-sync-timeout=720h
    // would fail the start with a false timeout). A wait of 24.8 days is as good as 30 for a cache that never syncs.
    beforeFirstSync: () =>
      kube.informers.start({ cacheSyncTimeoutMs: Math.min(config.cacheSyncTimeoutMs, MAX_TIMER_DELAY_MS) }),
    async close() {
      await kube.informers.stop();
      await kube.events.flush();
    },
  };
}
