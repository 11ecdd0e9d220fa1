import { definePlugin, servicePathExplainerKey } from '@kube-router/controller';
import type { ControllerPlugin } from '@kube-router/controller';
import { KubeServices } from '@kube-router/kube';
import type { KubeContext } from '@kube-router/kube';
import { ExecRunner, Nft } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import type { Logger } from 'pino';
import { createProxyNftablesController } from './controller.js';
import type { ProxySources } from './controller.js';
import { TABLES } from './names.js';
import { enabledFamilies, proxyNftablesOptions } from './options.js';
import type { ResolvedProxyNftablesOptions } from './options.js';

/** The plugin's name; its controller is `proxy`, like proxy-ipvs's, since an agent runs one proxy or the other. */
export const PROXY_NFTABLES_PLUGIN = 'proxy-nftables';

export interface ProxyNftablesPluginOverrides {
  /** Runs nft and conntrack; default an ExecRunner logging to the plugin's logger. */
  readonly runner?: CommandRunner;
}

/** The nftables service proxy plugin; `overrides` exist for tests. */
export function createProxyNftablesPlugin(overrides: ProxyNftablesPluginOverrides = {}): ControllerPlugin<ResolvedProxyNftablesOptions> {
  return definePlugin({
    name: PROXY_NFTABLES_PLUGIN,
    host: '^1.0.0',
    options: proxyNftablesOptions,
    tools: () => (overrides.runner ? [] : ['nft', 'conntrack']),
    create(ctx, options) {
      const kube = ctx.services.get(KubeServices);
      const controller = createProxyNftablesController(
        ctx,
        { sources: informerSources(kube, ctx.nodeName, ctx.logger), runner: overrides.runner ?? new ExecRunner({ logger: ctx.logger }) },
        options,
      );
      // `kube-router explain` asks the proxy about flows to Service addresses.
      ctx.services.provide(servicePathExplainerKey, { explainServiceFlow: (flow) => controller.explainServiceFlow(flow) });
      return controller;
    },
    // --cleanup-config: the proxy's tables, nothing else.
    async cleanup(ctx, options) {
      const nft = new Nft({
        runner: overrides.runner ?? new ExecRunner({ logger: ctx.logger }),
        ...(options.netns !== undefined && { netns: options.netns }),
        timeoutMs: options.commandTimeoutMs,
      });
      await nft.deleteTables(enabledFamilies({ enableIpv4: true, enableIpv6: true }).map((family) => TABLES[family]));
    },
  });
}

/** Kubernetes Services on nftables: kube-proxy's nftables semantics with kube-router's flags and annotations. */
export const proxyNftablesPlugin = createProxyNftablesPlugin();

/** The agent's informers as the controller's sources. */
export function informerSources(kube: KubeContext, nodeName: string, logger: Logger): ProxySources {
  const services = kube.informers.services();
  const slices = kube.informers.endpointSlices();
  const nodes = kube.informers.nodes();
  return {
    services: () => services.list(),
    slicesFor: (namespace, name) => slices.listForService(namespace, name),
    node: () => nodes.get(nodeName),
    hasSynced: () => services.hasSynced() && slices.hasSynced() && nodes.hasSynced(),
    onChange(handler) {
      const removers = (['services', 'endpointslices', 'nodes'] as const).map((resource) => kube.informers.onChange(resource, handler));
      return () => removers.forEach((remove) => remove());
    },
    warnService(namespace, name, reason, message) {
      const service = services.get(namespace, name);
      const involved = service ? { ...service, apiVersion: 'v1', kind: 'Service' } : { apiVersion: 'v1', kind: 'Service', namespace, name };
      kube.events.warning(involved, reason, message).catch((error: unknown) => {
        logger.warn({ err: error, service: `${namespace}/${name}`, reason }, 'could not record event');
      });
    },
  };
}
