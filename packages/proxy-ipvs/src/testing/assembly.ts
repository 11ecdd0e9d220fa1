import { ServiceRegistry } from '@kube-router/controller';
import type { PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { createKubeContext, KubeServices, loadKubeConfig } from '@kube-router/kube';
import type { KubeContext } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import type { CommandRunner } from '@kube-router/netfilter';
import type { Logger } from 'pino';
import type { ProxyController } from '../controller.js';
import type { ProxyIpvsOptions } from '../options.js';
import { createProxyIpvsPlugin } from '../plugin.js';

export const NODE_NAME = 'tipvs-node';

export interface AssembledProxy {
  readonly kube: KubeContext;
  readonly controller: ProxyController;
  readonly metrics: AgentMetrics;
  readonly health: HealthRegistry;
}

/**
 * The proxy plugin created as the agent creates it (its context, KubeServices, options parsed by its schema), not yet
 * started: the test process and a separate proxy process (proxy-agent.ts) assemble it the same way.
 */
export async function assembleProxy(input: { kubeconfig: string; runner: CommandRunner; options: ProxyIpvsOptions; logger: Logger }): Promise<AssembledProxy> {
  const metrics = new AgentMetrics({ collectDefaultMetrics: false });
  const health = new HealthRegistry({ defaultGraceMs: 60_000 });
  const kube = createKubeContext({ kubeConfig: loadKubeConfig({ kubeconfig: input.kubeconfig, env: {} }), nodeName: NODE_NAME, logger: input.logger, metrics });
  const services = new ServiceRegistry();
  services.provide(KubeServices, kube);
  const ctx: PluginContext = { nodeName: NODE_NAME, logger: input.logger, metrics, health, services };
  const plugin = createProxyIpvsPlugin({ runner: input.runner });
  const controller = (await plugin.create(ctx, plugin.options.parse({ enableIpv6: true, ...input.options }))) as ProxyController;
  return { kube, controller, metrics, health };
}
