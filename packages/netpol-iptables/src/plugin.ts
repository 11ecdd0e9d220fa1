import { definePlugin } from '@kube-router/controller';
import type { ControllerPlugin } from '@kube-router/controller';
import { KubeServices } from '@kube-router/kube';
import type { KubeContext } from '@kube-router/kube';
import { ExecRunner } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import type { Logger } from 'pino';
import { createNetpolController, NETPOL_CONTROLLER } from './controller.js';
import type { NetpolSources } from './controller.js';
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
    version: '0.1.0',
    options: netpolIptablesOptions,
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
      const families = [...(options.enableIpv4 ? ['ipv4' as const] : []), ...(options.enableIpv6 ? ['ipv6' as const] : [])];
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

/** The informers as NetpolSources; with `nodeName`, also this node's Node (its pod CIDRs, for default deny). */
export function informerSources(kube: KubeContext, logger: Logger, nodeName?: string): NetpolSources {
  const nodes = nodeName === undefined ? undefined : kube.informers.nodes();
  const pods = kube.informers.pods();
  const namespaces = kube.informers.namespaces();
  const policies = kube.informers.networkPolicies();
  return {
    pods: () => pods.list(),
    namespaces: () => namespaces.list(),
    policies: () => policies.list(),
    hasSynced: () => pods.hasSynced() && namespaces.hasSynced() && policies.hasSynced() && (nodes?.hasSynced() ?? true),
    ...(nodes && nodeName !== undefined ? { node: () => nodes.get(nodeName) } : {}),
    onChange(handler) {
      const resources = ['pods', 'namespaces', 'networkpolicies', ...(nodes ? ['nodes' as const] : [])] as const;
      const removers = resources.map((resource) =>
        kube.informers.onChange(resource, handler),
      );
      return () => removers.forEach((remove) => remove());
    },
    warnPolicy(namespace, name, reason, message) {
      const policy = policies.get(namespace, name);
      // List items come without kind and apiVersion, as from a real API server; the event needs both.
      const involved = policy
        ? { ...policy, apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy' }
        : { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', namespace, name };
      kube.events.warning(involved, reason, message).catch((error: unknown) => {
        logger.warn({ err: error, policy: `${namespace}/${name}`, reason }, 'could not record event');
      });
    },
  };
}
