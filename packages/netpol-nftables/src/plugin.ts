import type { ControllerPlugin } from '@kube-router/controller';
import { Nft } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { defineNetpolPlugin } from '@kube-router/netpol';
import type { NetpolPluginOverrides } from '@kube-router/netpol';
import { createNftablesDataplane } from './dataplane.js';
import { netpolNftablesOptions } from './options.js';
import type { ResolvedNetpolNftablesOptions } from './options.js';
import { deleteNetpolTables } from './tables.js';

/** `runner` runs nft (and iptables and ipset for the other backend's leftovers) instead of an ExecRunner. */
export type NetpolNftablesPluginOverrides = NetpolPluginOverrides;

export function createNetpolNftablesPlugin(overrides: NetpolNftablesPluginOverrides = {}): ControllerPlugin<ResolvedNetpolNftablesOptions> {
  const cleanup = async (options: ResolvedNetpolNftablesOptions, runner: CommandRunner) => {
    // Our two tables, whole; nothing else lives in them.
    await deleteNetpolTables(new Nft({ runner, ...(options.netns === undefined ? {} : { netns: options.netns }), timeoutMs: options.commandTimeoutMs }));
  };
  return defineNetpolPlugin(
    { options: netpolNftablesOptions, tools: () => ['nft'], createDataplane: createNftablesDataplane, cleanup: (_ctx, options, runner) => cleanup(options, runner) },
    overrides,
  );
}

/** NetworkPolicy enforcement with nftables, as kube-router's --run-firewall with --use-nftables-for-netpol. */
export const netpolNftablesPlugin = createNetpolNftablesPlugin();
