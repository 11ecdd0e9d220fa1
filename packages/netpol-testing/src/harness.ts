/**
 * A netpol backend assembled as the agent assembles it, for the backends' own tests and benchmarks. It is not in
 * @kube-router/testkit because it needs the kube, controller, health and metrics packages, and those test themselves
 * with the testkit.
 */
import { CoreV1Api, NetworkingV1Api } from '@kubernetes/client-node';
import type { KubernetesObject } from '@kubernetes/client-node';
import { SyncScheduler } from '@kube-router/controller';
import type { Controller, ControllerPlugin, Services } from '@kube-router/controller';
import type { HealthRegistry } from '@kube-router/healthcheck';
import type { KubeContext } from '@kube-router/kube';
import type { AgentMetrics } from '@kube-router/metrics';
import { testPluginContext } from './context.js';

export interface HarnessEnv {
  kubeconfig: string;
  nodeName: string;
  /** The node's network namespace: the backend programs its rules there. */
  netns: string;
}

/** The enforcer and its parts. */
export interface HarnessEnforcer {
  controller: Controller;
  /** The services the plugin provided (netpol's explain service among them). */
  services: Services;
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
  /**
   * The plugin's options, over a short sync interval and timeout and both families (the lab's pods are dual-stack,
   * whatever the plugin's default); `netns` is always the env's.
   */
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
  const { ctx, kube, kubeConfig, metrics, health } = testPluginContext(env.kubeconfig, env.nodeName);
  const options = plugin.options.parse({
    enableIpv6: true,
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
    services: ctx.services,
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
