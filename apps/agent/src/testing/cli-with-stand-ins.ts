/**
 * The kube-router CLI as cli.ts runs it, with two features assembled from stand-ins (stand-ins.ts) for what this host
 * lacks, for the plugins' leak test and bench (plugin-churn.ts):
 *
 * - service-proxy on IPVS (without --use-nftables-for-service-proxy): proxy-ipvs with IPVS standing in;
 * - router: route-sync with nodeRoutesPlugin in place of routing-bgp (the routes it hands over go via
 *   KUBE_ROUTER_STAND_IN_GATEWAY), so that route-sync is measured without gobgpd.
 *
 * Every other feature is the default catalog's.
 */
import { createProxyIpvsPlugin } from '@kube-router/proxy-ipvs';
import { routeSyncPlugin } from '@kube-router/route-sync';
import { defaultCatalog, proxyOptions, proxyPlugins, routeSyncOptions } from '../catalog.js';
import { kubeEnvironment } from '../kube-environment.js';
import { runCli } from '../run-cli.js';
import { IpvsStandInRunner, nodeRoutesPlugin } from './stand-ins.js';

const gateway = process.env.KUBE_ROUTER_STAND_IN_GATEWAY;

const exitCode = await runCli(process.argv.slice(2), {
  environment: kubeEnvironment,
  catalog: {
    ...defaultCatalog,
    'service-proxy': (config) =>
      config.proxy.useNftables ? proxyPlugins(config) : [{ plugin: createProxyIpvsPlugin({ runner: new IpvsStandInRunner() }), options: proxyOptions(config) }],
    router: (config) => {
      if (gateway === undefined) throw new Error('KUBE_ROUTER_STAND_IN_GATEWAY (the next hop of the stand-in routes) is not set');
      return [
        { plugin: routeSyncPlugin, options: routeSyncOptions(config) },
        { plugin: nodeRoutesPlugin, options: { gateway } },
      ];
    },
  },
});
process.exit(exitCode);
