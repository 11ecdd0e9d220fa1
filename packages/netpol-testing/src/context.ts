import { ServiceRegistry } from '@kube-router/controller';
import type { PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { createKubeContext, KubeServices, loadKubeConfig } from '@kube-router/kube';
import type { KubeContext } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import type { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';

/** A plugin's context as the agent makes it, over its own Kubernetes client, health and metrics. */
export interface TestPluginContext {
  readonly ctx: PluginContext;
  readonly kube: KubeContext;
  readonly kubeConfig: KubeConfig;
  readonly metrics: AgentMetrics;
  readonly health: HealthRegistry;
}

/** The context the agent would give a plugin on `nodeName`, watching the API server of `kubeconfig`. */
export function testPluginContext(kubeconfig: string, nodeName: string): TestPluginContext {
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }).child({ controller: 'netpol' });
  const kubeConfig = loadKubeConfig({ kubeconfig, env: {} });
  const metrics = new AgentMetrics({ collectDefaultMetrics: false });
  const health = new HealthRegistry({ defaultGraceMs: 5_000 });
  const kube = createKubeContext({ kubeConfig, nodeName, logger, metrics });
  const services = new ServiceRegistry();
  services.provide(KubeServices, kube);
  return { ctx: { nodeName, logger, metrics, health, services }, kube, kubeConfig, metrics, health };
}
