/**
 * A netpol backend assembled as the agent assembles it, for the backends' own tests and benchmarks: not part of the
 * runtime API. It lives here rather than in @kube-router/testkit because it needs the kube, controller, health and
 * metrics packages, and those test themselves with the testkit.
 */
import { CoreV1Api, NetworkingV1Api } from '@kubernetes/client-node';
import type { KubernetesObject } from '@kubernetes/client-node';
import { ServiceRegistry, SyncScheduler } from '@kube-router/controller';
import type { Controller, ControllerPlugin, PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { createKubeContext, KubeServices, loadKubeConfig } from '@kube-router/kube';
import type { KubeContext } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import pino from 'pino';

export interface HarnessEnv {
  kubeconfig: string;
  nodeName: string;
  /** The node's network namespace: the backend programs its rules there. */
  netns: string;
}

/** The enforcer and its parts. */
export interface HarnessEnforcer {
  controller: Controller;
  kube: KubeContext;
  metrics: AgentMetrics;
  health: HealthRegistry;
  scheduler: SyncScheduler;
  /** Waits until the informers hold what the API server holds. */
  waitForInformers(): Promise<void>;
  /** Waits until the informers hold what the API server holds, then runs one sync and says how it went. */
  syncNow(): Promise<{ ok: boolean; error?: unknown }>;
  /** Stops the loop and the informers; the rules stay in the kernel. */
  stop(): Promise<void>;
}

export interface HarnessOptions {
  /** The plugin's options, over a short sync interval and timeout; `netns` is always the env's. */
  options?: object;
  /** Start the scheduler's loop (event-driven syncs). Default true. */
  scheduler?: boolean;
}

/**
 * Starts `plugin` against any API server, programming `env.netns`: its own KubeContext (informers started and
 * synced first), health, metrics and a scheduler with a short minimum interval, so that cluster changes are enforced
 * within a fraction of a second.
 */
export async function startNetpolHarness(plugin: ControllerPlugin<unknown>, env: HarnessEnv, extra: HarnessOptions = {}): Promise<HarnessEnforcer> {
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }).child({ controller: 'netpol' });
  const kubeConfig = loadKubeConfig({ kubeconfig: env.kubeconfig, env: {} });
  const metrics = new AgentMetrics({ collectDefaultMetrics: false });
  const health = new HealthRegistry({ defaultGraceMs: 5_000 });
  const kube = createKubeContext({ kubeConfig, nodeName: env.nodeName, logger, metrics });
  const services = new ServiceRegistry();
  services.provide(KubeServices, kube);
  const ctx: PluginContext = { nodeName: env.nodeName, logger, metrics, health, services };
  const options = plugin.options.parse({
    syncPeriodMs: 60_000,
    minSyncIntervalMs: 100,
    syncTimeoutMs: 30_000,
    ...extra.options,
    netns: env.netns,
  });
  const controller = await plugin.create(ctx, options);
  const scheduler = new SyncScheduler(controller, { initialBackoffMs: 200, maxBackoffMs: 2_000 });
  await controller.start({ requestSync: (reason) => scheduler.requestSync(reason), signal: new AbortController().signal });
  // The first sync must see the whole cluster: programming from empty caches would open every pod.
  await kube.informers.start({ cacheSyncTimeoutMs: 20_000 });
  if (extra.scheduler ?? true) scheduler.start();

  const core = kubeConfig.makeApiClient(CoreV1Api);
  const networking = kubeConfig.makeApiClient(NetworkingV1Api);
  const caughtUp = async (): Promise<boolean> => {
    const [pods, namespaces, policies] = await Promise.all([
      core.listPodForAllNamespaces(),
      core.listNamespace(),
      networking.listNetworkPolicyForAllNamespaces(),
    ]);
    return (
      sameVersions(pods.items, kube.informers.pods().list()) &&
      sameVersions(namespaces.items, kube.informers.namespaces().list()) &&
      sameVersions(policies.items, kube.informers.networkPolicies().list())
    );
  };
  const waitForInformers = async () => {
    const deadline = Date.now() + 10_000;
    while (!(await caughtUp())) {
      if (Date.now() > deadline) throw new Error('informers did not catch up with the API server within 10 s');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };

  let stopped = false;
  return {
    controller,
    kube,
    metrics,
    health,
    scheduler,
    waitForInformers,
    async syncNow() {
      await waitForInformers();
      const outcome = await controller.runObservedSync('syncNow');
      return outcome.ok ? { ok: true } : { ok: false, error: outcome.error };
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      // Whoever started the loop (this function or the caller), stop() ends it and then stops the controller.
      await scheduler.stop();
      await kube.informers.stop();
      await kube.events.flush();
    },
  };
}

function sameVersions(expected: readonly KubernetesObject[], cached: readonly KubernetesObject[]): boolean {
  if (expected.length !== cached.length) return false;
  const versions = new Map(cached.map((object) => [object.metadata?.uid, object.metadata?.resourceVersion]));
  return expected.every((object) => versions.get(object.metadata?.uid) === object.metadata?.resourceVersion);
}
