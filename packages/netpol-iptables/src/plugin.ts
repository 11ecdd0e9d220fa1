import { definePlugin } from '@kube-router/controller';
import type { ControllerPlugin } from '@kube-router/controller';
import { KubeServices } from '@kube-router/kube';
import { ExecRunner, iptablesBinary } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { informerSources, NETPOL_CONTROLLER, netpolFamilies } from '@kube-router/netpol';
import { createNetpolController } from './controller.js';
import { removeIptablesNetpol } from './cleanup.js';
import { netpolIptablesOptions } from './options.js';
import type { ResolvedNetpolIptablesOptions } from './options.js';

export interface NetpolIptablesPluginOverrides {
  /** Runs iptables and ipset; default an ExecRunner logging to the plugin's logger. */
  readonly runner?: CommandRunner;
}

/** A NetworkPolicy enforcer plugin; `overrides` exist for tests that must break the kernel tools on purpose. */
export function createNetpolIptablesPlugin(
  overrides: NetpolIptablesPluginOverrides = {},
): ControllerPlugin<ResolvedNetpolIptablesOptions> {
  return definePlugin({
    name: NETPOL_CONTROLLER,
    host: '^0.1.0',
    options: netpolIptablesOptions,
    // A test's runner stands in for the tools.
    tools: (options) =>
      overrides.runner
        ? []
        : [
            'ipset',
            ...netpolFamilies(options).flatMap((family) => [
              iptablesBinary(family, options.iptablesBackend, 'save'),
              iptablesBinary(family, options.iptablesBackend, 'restore'),
            ]),
          ],
    create(ctx, options) {
      const kube = ctx.services.get(KubeServices);
      return createNetpolController(
        ctx,
        {
          // The Node (its pod CIDRs) only matters to default deny; without it, node updates need not wake the loop.
          sources: informerSources(kube, ctx.logger, options.defaultDeny ? ctx.nodeName : undefined),
          runner: overrides.runner ?? new ExecRunner({ logger: ctx.logger }),
        },
        options,
      );
    },
    // --cleanup-config: our jumps, chains and ipsets, and the nftables backend's tables; nothing of anyone else's.
    async cleanup(ctx, options) {
      const families = netpolFamilies(options);
      await removeIptablesNetpol({
        runner: overrides.runner ?? new ExecRunner({ logger: ctx.logger }),
        families,
        backend: options.iptablesBackend,
        ...(options.netns === undefined ? {} : { netns: options.netns }),
        timeoutMs: options.commandTimeoutMs,
      });
    },
  });
}

/** NetworkPolicy enforcement with iptables chains and ipsets, as kube-router's --run-firewall. */
export const netpolIptablesPlugin = createNetpolIptablesPlugin();
