import { CoreV1Api, NetworkingV1Api } from '@kubernetes/client-node';
import type { KubernetesObject } from '@kubernetes/client-node';
import { ServiceRegistry, SyncScheduler } from '@kube-router/controller';
import type { Controller, ControllerPlugin, PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { createKubeContext, KubeServices, loadKubeConfig } from '@kube-router/kube';
import type { KubeContext } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import type { CommandRunner } from '@kube-router/netfilter';
import pino from 'pino';
import { createNetpolNftablesPlugin } from '../plugin.js';
import type { NetpolNftablesOptions } from '../options.js';

export interface EnforcerEnv {
  kubeconfig: string;
  nodeName: string;
  netns: string;
}

export interface Enforcer {
  /** Waits until the informers hold what the API server holds, then runs one sync and says how it went. */
  syncNow(): Promise<{ ok: boolean; error?: unknown }>;
  /** Stops the agent; the rules stay in the kernel. */
  stop(): Promise<void>;
}

/** The enforcer and its parts, for this package's own tests. */
export interface TestEnforcer extends Enforcer {
  controller: Controller;
  kube: KubeContext;
  metrics: AgentMetrics;
  health: HealthRegistry;
  scheduler: SyncScheduler;
  /** Waits until the informers hold what the API server holds. */
  waitForInformers(): Promise<void>;
}

export interface TestEnforcerOptions {
  options?: NetpolNftablesOptions;
  runner?: CommandRunner;
  /** Start the scheduler's loop (event-driven syncs). Default true. */
  scheduler?: boolean;
  /** Another plugin of the same controller (the iptables backend, for the switch test), with its own options. */
  plugin?: ControllerPlugin<unknown>;
}

/**
 * The netpol plugin assembled as the agent assembles it, against any API server, programming the node netns
 * `env.netns`: its own KubeContext (informers started and synced first), health, metrics and a scheduler with a
 * short minimum interval, so that cluster changes are enforced within a fraction of a second.
 */
export async function startNftablesEnforcer(env: EnforcerEnv): Promise<Enforcer> {
  return startTestEnforcer(env);
}

export async function startTestEnforcer(env: EnforcerEnv, extra: TestEnforcerOptions = {}): Promise<TestEnforcer> {
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }).child({ controller: 'netpol' });
  const kubeConfig = loadKubeConfig({ kubeconfig: env.kubeconfig, env: {} });
  const metrics = new AgentMetrics({ collectDefaultMetrics: false });
  const health = new HealthRegistry({ defaultGraceMs: 5_000 });
  const kube = createKubeContext({ kubeConfig, nodeName: env.nodeName, logger, metrics });
  const services = new ServiceRegistry();
  services.provide(KubeServices, kube);
  const ctx: PluginContext = { nodeName: env.nodeName, logger, metrics, health, services };
  const plugin: ControllerPlugin<unknown> = extra.plugin ?? createNetpolNftablesPlugin(extra.runner ? { runner: extra.runner } : {});
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
  const runScheduler = extra.scheduler ?? true;
  if (runScheduler) scheduler.start();

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
