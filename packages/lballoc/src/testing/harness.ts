import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { ServiceRegistry, SyncScheduler, type Controller, type PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { createKubeContext, KubeServices, loadKubeConfig, statusCodeOf, type KubeContext, type LeaderElector } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import { startApiServer, type ApiServer } from '@kube-router/testkit';
import pino from 'pino';
import { lballocPlugin, type LballocOptions } from '../plugin.js';

export const LEASE_DURATION_MS = 1_500;

export interface TestAgent {
  identity: string;
  controller: Controller;
  kube: KubeContext;
  health: HealthRegistry;
  metrics: AgentMetrics;
  scheduler: SyncScheduler;
  /**
   * Each status write this agent sent, with whether it held the Lease when it sent it and, once answered, how the
   * API server answered (`written`, or the HTTP status of its refusal).
   */
  writes: { service: string; leading: boolean; answer?: 'written' | number }[];
  /**
   * Runs before each status write goes out (after it was recorded): a test delays a write here as a slow network
   * would, so that it reaches the API server late.
   */
  beforeWrite: ((service: string, ingress: readonly string[]) => Promise<void>) | undefined;
  isLeader(): boolean;
  /** Starts informers, election and (unless told not to) the scheduler's loop. */
  start(options?: { scheduler?: boolean }): Promise<void>;
  stop(): Promise<void>;
  /**
   * Ends the replica as SIGKILL would: no further sync, no renewal and no release of the Lease. Writes already on
   * their way (held by beforeWrite) still arrive.
   */
  crash(): Promise<void>;
}

export async function startCluster(): Promise<{ server: ApiServer; kubeconfig: string }> {
  const server = await startApiServer({ port: 0 });
  return { server, kubeconfig: await server.writeKubeconfig() };
}

/**
 * One replica of the allocator, assembled as the agent assembles it: its own health, metrics, KubeContext (informers,
 * events, leader election with shortened timings) and scheduler. The API client's status writes are observed, not
 * replaced, so a test can tell which replica wrote and whether it led at that moment.
 */
export function createTestAgent(kubeconfig: string, identity: string, options: LballocOptions): TestAgent {
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }).child({ controller: 'lballoc', identity });
  const kubeConfig: KubeConfig = loadKubeConfig({ kubeconfig, env: {} });
  const writes: TestAgent['writes'] = [];
  let elector: LeaderElector | undefined;
  let beforeWrite: TestAgent['beforeWrite'];
  const makeApiClient = kubeConfig.makeApiClient.bind(kubeConfig);
  kubeConfig.makeApiClient = ((apiClass: typeof CoreV1Api) => {
    const api = makeApiClient(apiClass);
    if (api instanceof CoreV1Api) {
      const replace = api.replaceNamespacedServiceStatus.bind(api);
      api.replaceNamespacedServiceStatus = async (request, options) => {
        const service = `${request.namespace}/${request.name}`;
        const write: TestAgent['writes'][number] = { service, leading: elector?.isLeader() ?? false };
        writes.push(write);
        const held = beforeWrite?.(service, (request.body.status?.loadBalancer?.ingress ?? []).flatMap((entry) => entry.ip ?? []));
        if (held) await held;
        try {
          // A write the hook held was already on the wire: it arrives whatever the client decided meanwhile (its sync
          // timed out, its process died), so it goes out without the client's abort signal.
          const written = await (held ? replace(request) : replace(request, options));
          write.answer = 'written';
          return written;
        } catch (error) {
          write.answer = statusCodeOf(error) ?? -1;
          throw error;
        }
      };
    }
    return api;
  }) as KubeConfig['makeApiClient'];

  const metrics = new AgentMetrics({ collectDefaultMetrics: false });
  const health = new HealthRegistry({ defaultGraceMs: 5_000 });
  const kube = createKubeContext({
    kubeConfig,
    nodeName: identity,
    logger,
    metrics,
    leaderElection: {
      namespace: 'kube-system',
      identity,
      leaseDurationMs: LEASE_DURATION_MS,
      renewDeadlineMs: 1_000,
      retryPeriodMs: 200,
    },
  });
  const leaderElector = kube.leaderElector.bind(kube);
  const observedKube: KubeContext = {
    ...kube,
    leaderElector: (request) => {
      const created = leaderElector(request);
      elector = created;
      return created;
    },
  };
  const services = new ServiceRegistry();
  services.provide(KubeServices, observedKube);
  const ctx: PluginContext = { nodeName: identity, logger, metrics, health, services };
  const parsed = lballocPlugin.options.parse({ syncPeriodMs: 500, minSyncIntervalMs: 50, ...options });
  const controller = lballocPlugin.create(ctx, parsed) as Controller;
  const scheduler = new SyncScheduler(controller, { initialBackoffMs: 100 });
  let started = false;
  const agent: TestAgent = {
    identity,
    controller,
    kube,
    health,
    metrics,
    scheduler,
    writes,
    get beforeWrite() {
      return beforeWrite;
    },
    set beforeWrite(hook) {
      beforeWrite = hook;
    },
    isLeader: () => elector?.isLeader() ?? false,
    async start(options: { scheduler?: boolean } = {}) {
      await controller.start({ requestSync: (r) => scheduler.requestSync(r), signal: new AbortController().signal });
      await kube.informers.start({ cacheSyncTimeoutMs: 10_000 });
      started = options.scheduler ?? true;
      if (started) scheduler.start();
    },
    async stop() {
      await (started ? scheduler.stop() : controller.stop());
      await kube.informers.stop();
    },
    async crash() {
      scheduler.halt();
      await elector?.stop({ release: false });
      await kube.informers.stop();
    },
  };
  return agent;
}

export function loadBalancer(name: string, spec: Record<string, unknown> = {}, metadata: Record<string, unknown> = {}) {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: 'default', ...metadata },
    spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }], ...spec },
  };
}

export function ingressOf(server: ApiServer, name: string, namespace = 'default'): string[] {
  const svc = server.get('v1', 'Service', namespace, name) as { status?: { loadBalancer?: { ingress?: { ip?: string }[] } } } | undefined;
  return (svc?.status?.loadBalancer?.ingress ?? []).flatMap((i) => (i.ip ? [i.ip] : []));
}

/** The repository's one waiter (`@kube-router/testkit`), here beside the harness that the tests import. */
export { waitFor } from '@kube-router/testkit';
