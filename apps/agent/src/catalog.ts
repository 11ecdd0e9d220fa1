import { lballocPlugin } from '@kube-router/lballoc';
import { netpolIptablesPlugin, type NetpolIptablesOptions } from '@kube-router/netpol-iptables';
import { netpolNftablesPlugin, type NetpolNftablesOptions } from '@kube-router/netpol-nftables';
import { proxyIpvsPlugin, type ProxyIpvsOptions } from '@kube-router/proxy-ipvs';
import { routeSyncPlugin, type RouteSyncOptions } from '@kube-router/route-sync';
import { routingBgpPlugin, type RoutingBgpOptions } from '@kube-router/routing-bgp';
import type { PluginEntry } from './assembly.js';
import { FEATURES, type AgentConfig, type Feature } from './flags.js';
import { peerRoutersOfFlags } from './peer-routers.js';

/**
 * Builds the plugins of one feature from the agent's configuration: the flags become plugin options here, so that
 * plugins never see the command line. A feature may need several plugins (the router: BGP and route sync).
 */
export type PluginFactory = (config: AgentConfig) => readonly PluginEntry[];

/** Which plugins implement which --run-* feature. */
export type PluginCatalog = Readonly<Partial<Record<Feature, PluginFactory>>>;

/** The reference assembly's catalog: the flags of each feature become its plugins' options here. */
export const defaultCatalog: PluginCatalog = {
  firewall: (config) => firewallPlugins(config),
  'service-proxy': (config) => [{ plugin: proxyIpvsPlugin, options: proxyOptions(config) }],
  // route-sync first: routing-bgp requires it and hands it the routes it learns.
  router: (config) => [
    { plugin: routeSyncPlugin, options: routeSyncOptions(config) },
    { plugin: routingBgpPlugin, options: routingBgpOptions(config) },
  ],
  loadbalancer: (config) => [
    {
      plugin: lballocPlugin,
      options: {
        ranges: config.loadbalancer.ipRanges,
        defaultClass: config.loadbalancer.defaultClass,
        syncPeriodMs: config.loadbalancer.syncPeriodMs,
      },
    },
  ],
};

/** The netpol-iptables options the flags give; `netns` runs every iptables and ipset command in that namespace. */
export function firewallOptions(config: AgentConfig, netns?: string): NetpolIptablesOptions {
  return {
    enableIpv4: config.ipFamilies.ipv4,
    enableIpv6: config.ipFamilies.ipv6,
    defaultDeny: config.firewall.defaultDeny,
    syncPeriodMs: config.firewall.syncPeriodMs,
    serviceClusterIpRanges: config.services.clusterIpRanges,
    serviceExternalIpRanges: config.services.externalIpRanges,
    nodePortRange: config.services.nodePortRange,
    ...(netns !== undefined && { netns }),
  };
}

/** The netpol-nftables options the flags give (--use-nftables-for-netpol); `netns` runs every nft command there. */
export function nftablesFirewallOptions(config: AgentConfig, netns?: string): NetpolNftablesOptions {
  return { ...firewallOptions(config, netns), serviceLoadBalancerIpRanges: config.loadbalancer.ipRanges };
}

/**
 * The firewall's plugin: netpol-nftables with --use-nftables-for-netpol, else netpol-iptables (both are the `netpol`
 * controller, and each removes what the other left). `extra` options go to either.
 */
export function firewallPlugins(
  config: AgentConfig,
  netns?: string,
  extra: { minSyncIntervalMs?: number } = {},
): PluginEntry[] {
  return config.firewall.useNftables
    ? [{ plugin: netpolNftablesPlugin, options: { ...nftablesFirewallOptions(config, netns), ...extra } }]
    : [{ plugin: netpolIptablesPlugin, options: { ...firewallOptions(config, netns), ...extra } }];
}

/** The proxy-ipvs options the flags give; `netns` runs every ipvsadm, ip, ipset and iptables command there. */
export function proxyOptions(config: AgentConfig, netns?: string): ProxyIpvsOptions {
  const seconds = (ms: number) => Math.round(ms / 1000);
  return {
    enableIpv4: config.ipFamilies.ipv4,
    enableIpv6: config.ipFamilies.ipv6,
    syncPeriodMs: config.proxy.syncPeriodMs,
    gracefulTermination: config.proxy.gracefulTermination,
    gracefulPeriodMs: config.proxy.gracefulPeriodMs,
    ipvsPermitAll: config.proxy.permitAll,
    excludedCidrs: config.proxy.excludedCidrs,
    hairpinMode: config.proxy.hairpinMode,
    masqueradeAll: config.proxy.masqueradeAll,
    nodePortBindOnAllIp: config.proxy.nodePortBindOnAllIp,
    tcpTimeoutSeconds: seconds(config.proxy.tcpTimeoutMs),
    tcpFinTimeoutSeconds: seconds(config.proxy.tcpFinTimeoutMs),
    udpTimeoutSeconds: seconds(config.proxy.udpTimeoutMs),
    // kube-router's svcip validator: the proxy programs only the addresses the router would announce.
    strictExternalIpValidation: config.proxy.strictExternalIpValidation,
    serviceExternalIpRanges: config.services.externalIpRanges,
    loadBalancerIpRanges: config.proxy.loadBalancerIpRanges,
    serviceClusterIpRanges: config.services.clusterIpRanges,
    ...(netns !== undefined && { netns }),
  };
}

/** The route-sync options the flags give. */
export function routeSyncOptions(config: AgentConfig): RouteSyncOptions {
  return {
    syncPeriodMs: config.routing.injectedRoutesSyncPeriodMs,
    // The routes an earlier run left stay as long as BGP peers keep this node's routes through a restart.
    adoptionGraceMs: config.routing.bgp.gracefulRestartTimeMs,
    enableIpv4: config.ipFamilies.ipv4,
    enableIpv6: config.ipFamilies.ipv6,
  };
}

/** The routing-bgp options the flags give; kube-router's "unset" values (0, "") keep the plugin's defaults. */
export function routingBgpOptions(config: AgentConfig): RoutingBgpOptions {
  const { routing } = config;
  return {
    syncPeriodMs: routing.syncPeriodMs,
    bgpPort: routing.bgp.port,
    holdTimeSeconds: Math.round(routing.bgp.holdTimeMs / 1000),
    ...(routing.routerId !== '' && { routerId: routing.routerId as RoutingBgpOptions['routerId'] }),
    ...(routing.clusterAsn !== 0 && { clusterAsn: routing.clusterAsn }),
    nodesFullMesh: routing.nodesFullMesh,
    enableIpv4: config.ipFamilies.ipv4,
    enableIpv6: config.ipFamilies.ipv6,
    enableIbgp: routing.enableIbgp,
    advertisePodCidr: routing.advertisePodCidr,
    advertiseClusterIp: routing.advertiseClusterIp,
    advertiseExternalIp: routing.advertiseExternalIp,
    advertiseLoadBalancerIp: routing.advertiseLoadBalancerIp,
    // kube-router's svcip validator filters the router's announcements as well as the proxy's services.
    strictExternalIpValidation: config.proxy.strictExternalIpValidation,
    serviceExternalIpRanges: config.services.externalIpRanges,
    loadBalancerIpRanges: config.proxy.loadBalancerIpRanges,
    serviceClusterIpRanges: config.services.clusterIpRanges,
    overrideNextHop: routing.overrideNextHop,
    enablePodEgress: routing.enablePodEgress,
    enableCni: routing.enableCni,
    autoMtu: routing.autoMtu,
    // Read only with --enable-cni, as kube-router reads it: a stale value must not refuse an agent that ignores it.
    ...(routing.enableCni && routing.cniConfFile !== undefined && { cniConfFile: routing.cniConfFile }),
    ...(routing.gobgpAdmin.address !== '' && { gobgpAdminAddress: routing.gobgpAdmin.address }),
    gobgpAdminPort: routing.gobgpAdmin.port,
    peerRouters: usablePeerRouters(routing.peers),
    peerMultihopTtl: routing.peers.multihopTtl,
    gracefulRestart: routing.bgp.gracefulRestart,
    gracefulRestartTimeSeconds: Math.round(routing.bgp.gracefulRestartTimeMs / 1000),
    gracefulRestartDeferralTimeSeconds: Math.round(routing.bgp.gracefulRestartDeferralTimeMs / 1000),
  };
}

/**
 * The external peers of the --peer-router-* flags. The flags were checked at start (flag-validation.ts), but the
 * passwords file is read again here: if it became unreadable, or a configuration was built without parseFlags, the
 * start is refused rather than peering without MD5 or without a peer.
 */
function usablePeerRouters(flags: AgentConfig['routing']['peers']): NonNullable<RoutingBgpOptions['peerRouters']> {
  const { peerRouters, problems } = peerRoutersOfFlags(flags);
  if (problems.length > 0) throw new Error(`the external BGP peers cannot be configured: ${problems.join('; ')}`);
  return peerRouters;
}

/** The flag that enables each feature, for messages. */
export const FEATURE_FLAGS: Readonly<Record<Feature, string>> = {
  firewall: '--run-firewall',
  'service-proxy': '--run-service-proxy',
  router: '--run-router',
  loadbalancer: '--run-loadbalancer',
};

export class MissingFeatureError extends Error {
  readonly features: readonly Feature[];

  constructor(features: readonly Feature[], catalog: PluginCatalog) {
    const available = FEATURES.filter((feature) => catalog[feature]);
    super(
      `${features.map((f) => `${FEATURE_FLAGS[f]} is enabled but this build has no plugin for ${f}`).join('; ')}. ` +
        `Disable it with ${features.map((f) => `${FEATURE_FLAGS[f]}=false`).join(' ')}` +
        ` (features available in this build: ${available.join(', ') || 'none'}).`,
    );
    this.name = 'MissingFeatureError';
    this.features = features;
  }
}

/** The plugin entries of every enabled feature, in the order of FEATURES; throws MissingFeatureError for gaps. */
export function pluginsForConfig(config: AgentConfig, catalog: PluginCatalog): PluginEntry[] {
  const enabled = FEATURES.filter((feature) => config.features[feature]);
  const missing = enabled.filter((feature) => !catalog[feature]);
  if (missing.length > 0) throw new MissingFeatureError(missing, catalog);
  const entries = enabled.flatMap((feature) => [...(catalog[feature] as PluginFactory)(config)]);
  // Two features may need one plugin (say, route sync); it joins once when both ask for it with the same options.
  // With different options both stay, and the assembly refuses the duplicate.
  return entries.filter(
    (entry, index) =>
      entries.findIndex(
        (other) => other.plugin === entry.plugin && JSON.stringify(other.options) === JSON.stringify(entry.options),
      ) === index,
  );
}
