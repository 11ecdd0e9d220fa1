import type { ControllerPlugin } from '@kube-router/controller';
import { iptablesBinary } from '@kube-router/netfilter';
import { defineNetpolPlugin, netpolFamilies } from '@kube-router/netpol';
import type { NetpolPluginOverrides } from '@kube-router/netpol';
import { removeIptablesNetpol } from './cleanup.js';
import { createIptablesDataplane } from './dataplane.js';
import { netpolIptablesOptions } from './options.js';
import type { ResolvedNetpolIptablesOptions } from './options.js';

/** `runner` runs iptables and ipset instead of an ExecRunner. */
export type NetpolIptablesPluginOverrides = NetpolPluginOverrides;

/** A NetworkPolicy enforcer plugin; `overrides` exist for tests that must break the kernel tools on purpose. */
export function createNetpolIptablesPlugin(overrides: NetpolIptablesPluginOverrides = {}): ControllerPlugin<ResolvedNetpolIptablesOptions> {
  return defineNetpolPlugin(
    {
      options: netpolIptablesOptions,
      tools: (options) => [
        'ipset',
        ...netpolFamilies(options).flatMap((family) => [
          iptablesBinary(family, options.iptablesBackend, 'save'),
          iptablesBinary(family, options.iptablesBackend, 'restore'),
        ]),
      ],
      createDataplane: createIptablesDataplane,
      // --cleanup-config: our jumps, chains and ipsets, and the nftables backend's tables; nothing of anyone else's.
      cleanup: (_ctx, options, runner) =>
        removeIptablesNetpol({
          runner,
          families: netpolFamilies(options),
          backend: options.iptablesBackend,
          ...(options.netns === undefined ? {} : { netns: options.netns }),
          timeoutMs: options.commandTimeoutMs,
        }),
    },
    overrides,
  );
}

/** NetworkPolicy enforcement with iptables chains and ipsets, as kube-router's --run-firewall. */
export const netpolIptablesPlugin = createNetpolIptablesPlugin();
