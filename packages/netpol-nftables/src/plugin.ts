import { definePlugin } from '@kube-router/controller';
import type { ControllerPlugin } from '@kube-router/controller';
import { KubeServices } from '@kube-router/kube';
import { ExecRunner, Nft } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { informerSources, NETPOL_CONTROLLER } from '@kube-router/netpol';
import { createNetpolNftablesController } from './controller.js';
import { netpolNftablesOptions } from './options.js';
import { deleteNetpolTables } from './tables.js';
import type { ResolvedNetpolNftablesOptions } from './options.js';

export interface NetpolNftablesPluginOverrides {
  /** Runs nft (and iptables/ipset for the other backend's leftovers); default an ExecRunner logging to the plugin's logger. */
  readonly runner?: CommandRunner;
}

export function createNetpolNftablesPlugin(
  overrides: NetpolNftablesPluginOverrides = {},
): ControllerPlugin<ResolvedNetpolNftablesOptions> {
  return definePlugin({
    name: NETPOL_CONTROLLER,
    host: '^0.1.0',
    options: netpolNftablesOptions,
    // A test's runner stands in for the tool.
    tools: () => (overrides.runner ? [] : ['nft']),
    create(ctx, options) {
      const kube = ctx.services.get(KubeServices);
      return createNetpolNftablesController(
        ctx,
        {
          // The Node (its pod CIDRs) only matters to default deny; without it, node updates need not wake the loop.
          sources: informerSources(kube, ctx.logger, options.defaultDeny ? ctx.nodeName : undefined),
          runner: overrides.runner ?? new ExecRunner({ logger: ctx.logger }),
        },
        options,
      );
    },
    // --cleanup-config: our two tables, whole; nothing else lives in them.
    async cleanup(ctx, options) {
      const nft = new Nft({
        runner: overrides.runner ?? new ExecRunner({ logger: ctx.logger }),
        ...(options.netns === undefined ? {} : { netns: options.netns }),
        timeoutMs: options.commandTimeoutMs,
      });
      await deleteNetpolTables(nft);
    },
  });
}

/** NetworkPolicy enforcement with nftables, as kube-router's --run-firewall with --use-nftables-for-netpol. */
export const netpolNftablesPlugin = createNetpolNftablesPlugin();
