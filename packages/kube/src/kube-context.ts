import type { KubeConfig } from '@kubernetes/client-node';
import { defineServiceKey } from '@kube-router/controller';
import type { AgentMetrics } from '@kube-router/metrics';
import type { Logger } from 'pino';
import { resolveIdentity, resolveNamespace } from './config.js';
import { EventRecorder } from './event-recorder.js';
import { InformerFactory } from './informer-factory.js';
import type { InformerFactoryOptions } from './informer-factory.js';
import { LeaderElector } from './leader-elector.js';
import type { LeaderElectorOptions } from './leader-elector.js';

/** What a plugin asks for when it wants a leader-elected part: a Lease name and its callbacks. */
export interface LeaderElectionRequest {
  /** The Lease name, e.g. `kube-router-lballoc`. */
  name: string;
  onStartedLeading?: LeaderElectorOptions['onStartedLeading'];
  onStoppedLeading?: LeaderElectorOptions['onStoppedLeading'];
  onNewLeader?: LeaderElectorOptions['onNewLeader'];
  /** Defaults to the plugin's logger if given, else the agent's. */
  logger?: Logger;
}

/** The agent's Kubernetes access, provided under KubeServices for plugins to consume. */
export interface KubeContext {
  readonly kubeConfig: KubeConfig;
  /** This node's name (NODE_NAME, --hostname-override or the host name). */
  readonly nodeName: string;
  /** The shared informers and their listers. */
  readonly informers: InformerFactory;
  /** Events about objects whose sync failed. */
  readonly events: EventRecorder;
  /**
   * A leader elector on a Lease in the agent's namespace, with this agent's identity and the agent's timings. The
   * plugin starts it and stops it (in its controller's stop).
   */
  leaderElector(request: LeaderElectionRequest): LeaderElector;
}

/** The service key under which the agent provides its KubeContext. */
export const KubeServices = defineServiceKey<KubeContext>('kube');

export interface KubeContextOptions {
  kubeConfig: KubeConfig;
  nodeName: string;
  logger: Logger;
  metrics?: AgentMetrics;
  informers?: Omit<InformerFactoryOptions, 'kubeConfig' | 'logger' | 'metrics' | 'events'>;
  leaderElection?: {
    /** Default: POD_NAMESPACE, else the service account's namespace, else kube-system. */
    namespace?: string;
    /** Default: POD_NAME, else the host name. */
    identity?: string;
    leaseDurationMs?: number;
    renewDeadlineMs?: number;
    retryPeriodMs?: number;
  };
}

/** Builds the KubeContext the agent provides; the agent starts and stops `informers` and flushes `events`. */
export function createKubeContext(options: KubeContextOptions): KubeContext {
  const { kubeConfig, nodeName, logger, metrics } = options;
  const events = new EventRecorder({ kubeConfig, nodeName, logger });
  const informers = new InformerFactory({
    ...options.informers,
    kubeConfig,
    logger: logger.child({ component: 'informers' }),
    ...(metrics && { metrics }),
    events,
  });
  const election = options.leaderElection ?? {};
  const namespace = election.namespace ?? resolveNamespace();
  const identity = election.identity ?? resolveIdentity();
  return {
    kubeConfig,
    nodeName,
    informers,
    events,
    leaderElector: (request) =>
      new LeaderElector({
        kubeConfig,
        namespace,
        identity,
        name: request.name,
        logger: request.logger ?? logger,
        ...(metrics && { metrics }),
        ...(election.leaseDurationMs !== undefined && { leaseDurationMs: election.leaseDurationMs }),
        ...(election.renewDeadlineMs !== undefined && { renewDeadlineMs: election.renewDeadlineMs }),
        ...(election.retryPeriodMs !== undefined && { retryPeriodMs: election.retryPeriodMs }),
        ...(request.onStartedLeading && { onStartedLeading: request.onStartedLeading }),
        ...(request.onStoppedLeading && { onStoppedLeading: request.onStoppedLeading }),
        ...(request.onNewLeader && { onNewLeader: request.onNewLeader }),
      }),
  };
}
