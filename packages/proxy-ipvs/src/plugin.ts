import { definePlugin, servicePathExplainerKey } from '@kube-router/controller';
import type { ControllerPlugin } from '@kube-router/controller';
import { enabledFamilies, inCidrs, KubeServices, parseCidrs, serviceProxySources } from '@kube-router/kube';
import { ExecRunner, iptablesBinary } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { createProxyController, PROXY_CONTROLLER } from './controller.js';
import { Dataplane } from './dataplane.js';
import { proxyIpvsOptions } from './options.js';
import type { ResolvedProxyIpvsOptions } from './options.js';

export interface ProxyIpvsPluginOverrides {
  /** Runs ipvsadm, ip, ipset, iptables and sysctl; default an ExecRunner logging to the plugin's logger. */
  readonly runner?: CommandRunner;
}

/** The IPVS service proxy plugin; `overrides` exist for tests (a runner into a QEMU guest, a broken tool). */
export function createProxyIpvsPlugin(overrides: ProxyIpvsPluginOverrides = {}): ControllerPlugin<ResolvedProxyIpvsOptions> {
  return definePlugin({
    name: PROXY_CONTROLLER,
    host: '^1.0.0',
    options: proxyIpvsOptions,
    // A test's runner (one into a QEMU guest) stands in for the tools.
    tools: (options) =>
      overrides.runner
        ? []
        : [
            'ipvsadm',
            'ipset',
            'ip',
            // kube-bridge's learned ports, for hairpin (bridge-hairpin.ts).
            'bridge',
            'sysctl',
            // UDP flows to real servers that went (ipvs-stage.ts).
            'conntrack',
            ...enabledFamilies(options).flatMap((family) => [
              iptablesBinary(family, options.iptablesBackend, 'save'),
              iptablesBinary(family, options.iptablesBackend, 'restore'),
            ]),
          ],
    // Without IPVS in the kernel no Service is served; /proc/net/ip_vs is there once ip_vs is loaded (per netns).
    kernelFeatures: () => (overrides.runner ? [] : [{ name: 'IPVS (ip_vs)', path: '/proc/net/ip_vs' }]),
    create(ctx, options) {
      const kube = ctx.services.get(KubeServices);
      const controller = createProxyController(
        ctx,
        { sources: serviceProxySources(kube, ctx.nodeName, ctx.logger), runner: overrides.runner ?? new ExecRunner({ logger: ctx.logger }) },
        options,
      );
      // `kube-router explain` asks the proxy about flows to Service addresses.
      ctx.services.provide(servicePathExplainerKey, { explainServiceFlow: (flow) => controller.explainServiceFlow(flow) });
      return controller;
    },
    async cleanup(ctx, options) {
      const runner = overrides.runner ?? new ExecRunner({ logger: ctx.logger });
      const dataplane = new Dataplane({
        runner,
        ...(options.netns !== undefined && { netns: options.netns }),
        timeoutMs: options.commandTimeoutMs,
        families: enabledFamilies(options),
        iptablesBackend: options.iptablesBackend,
      });
      const excluded = parseCidrs(options.excludedCidrs);
      const saved = await dataplane.ipvs.save();
      const errors = await dataplane.removeEverything((address) => inCidrs(address, excluded), saved);
      if (errors.length > 0) throw new AggregateError(errors, `proxy cleanup: ${errors.map((error) => error.message).join('; ')}`);
    },
  });
}

/** Kubernetes Services on IPVS, as kube-router's --run-service-proxy. */
export const proxyIpvsPlugin = createProxyIpvsPlugin();
