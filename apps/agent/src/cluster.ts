import { pino, type Logger } from 'pino';
import { createKubeContext, DEFAULT_CACHE_SYNC_TIMEOUT_MS, KubeServices, loadKubeConfig, type KubeContext } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import type { CreateAgentInput } from './agent.js';

export interface ClusterConnectionOptions {
  /** This node's name: the plugins' `ctx.nodeName`, the events' source host, the informers' node scope. */
  nodeName: string;
  /** A kubeconfig file. Default: the in-cluster service account, else --master, else KUBECONFIG. */
  kubeconfig?: string;
  /** The API server's address, overriding the kubeconfig's or the in-cluster one (kube-router's --master). */
  master?: string;
  /** How long the first sync waits for the informer caches before the start fails. Default 60 s. */
  cacheSyncTimeoutMs?: number;
  /** Default: JSON lines on stdout at level info, as createAgent's. */
  logger?: Logger;
  /** Default: a fresh AgentMetrics with the process metrics. The agent must use the same one (spread does that). */
  metrics?: AgentMetrics;
}

/**
 * The Kubernetes wiring of an agent, shaped to be spread into createAgent: the KubeContext as `KubeServices`, the
 * informers' readiness check, the wait for their caches before the first sync, and the logger and metrics the
 * informers report to. `close()` stops the informers and flushes the events; call it after `agent.stop()`.
 */
export interface ClusterConnection
  extends Required<Pick<CreateAgentInput, 'services' | 'readinessChecks' | 'beforeFirstSync' | 'logger' | 'metrics'>> {
  readonly kube: KubeContext;
  close(): Promise<void>;
}

/**
 * Connects an assembly of one's own to the cluster the way the reference `kube-router` CLI does:
 *
 *   const cluster = connectToCluster({ nodeName });
 *   const agent = await createAgent({ ...cluster, plugins, options: { nodeName } });
 *
 * Nothing talks to the API server until the agent starts: the informers start once every controller has registered
 * its own, and a cache that does not sync within `cacheSyncTimeoutMs` fails `agent.start()` with the reason.
 */
export function connectToCluster(options: ClusterConnectionOptions): ClusterConnection {
  const logger = options.logger ?? pino({ level: 'info' });
  const metrics = options.metrics ?? new AgentMetrics();
  const kubeConfig = loadKubeConfig({
    ...(options.kubeconfig !== undefined && { kubeconfig: options.kubeconfig }),
    ...(options.master !== undefined && { master: options.master }),
  });
  const kube = createKubeContext({ kubeConfig, nodeName: options.nodeName, logger, metrics });
  const cacheSyncTimeoutMs = options.cacheSyncTimeoutMs ?? DEFAULT_CACHE_SYNC_TIMEOUT_MS;
  return {
    kube,
    logger,
    metrics,
    services: [[KubeServices, kube]],
    readinessChecks: { informers: kube.informers.readinessCheck },
    // Syncing against an empty cache would remove every rule the node has, so the first sync waits for the caches.
    beforeFirstSync: () => kube.informers.start({ cacheSyncTimeoutMs }),
    async close() {
      await kube.informers.stop();
      await kube.events.flush();
    },
  };
}
