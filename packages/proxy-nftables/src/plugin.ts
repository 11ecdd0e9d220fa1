import { definePlugin, servicePathExplainerKey } from '@kube-router/controller';
import type { ControllerPlugin } from '@kube-router/controller';
import { enabledFamilies, KubeServices, serviceProxySources } from '@kube-router/kube';
import { ExecRunner, Nft } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { createProxyNftablesController } from './controller.js';
import { TABLES } from './names.js';
import { proxyNftablesOptions } from './options.js';
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
        { sources: serviceProxySources(kube, ctx.nodeName, ctx.logger), runner: overrides.runner ?? new ExecRunner({ logger: ctx.logger }) },
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
