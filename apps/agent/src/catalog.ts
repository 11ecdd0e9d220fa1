import { lballocPlugin } from '@kube-router/lballoc';
import { netpolIptablesPlugin, type NetpolIptablesOptions } from '@kube-router/netpol-iptables';
import { netpolNftablesPlugin, type NetpolNftablesOptions } from '@kube-router/netpol-nftables';
import { proxyIpvsPlugin, type ProxyIpvsOptions } from '@kube-router/proxy-ipvs';
import { proxyNftablesPlugin, type ProxyNftablesOptions } from '@kube-router/proxy-nftables';
import { routeSyncPlugin, type RouteSyncOptions } from '@kube-router/route-sync';
import { routingBgpPlugin, type RoutingBgpOptions } from '@kube-router/routing-bgp';
import type { PluginEntry } from './assembly.js';
import { configValue, type AgentConfig } from './config.js';
import { FEATURES, FLAGS, type Feature, type FlagDefinition, type FlagOptionTargets, type OptionTarget } from './flags.js';
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
  'service-proxy': (config) => proxyPlugins(config),
  // route-sync first: routing-bgp requires it and hands it the routes it learns.
  router: (config) => [
    { plugin: routeSyncPlugin, options: routeSyncOptions(config) },
    { plugin: routingBgpPlugin, options: routingBgpOptions(config) },
  ],
  loadbalancer: (config) => [{ plugin: lballocPlugin, options: flagOptions('lballoc', config) }],
};

/**
 * The options of one target that the flags give, each flag's value set as its definition says (`options` in FLAGS).
 * Every option the flags name is set, so that a plugin's own defaults never stand in for kube-router's.
 */
export function flagOptions<Target extends OptionTarget>(target: Target, config: AgentConfig): FlagOptionTargets[Target] {
  const options: Record<string, unknown> = {};
  for (const [name, definition] of Object.entries(FLAGS) as Array<[string, FlagDefinition]>) {
    const mapping = definition.options?.[target];
    if (mapping === undefined) continue;
    const value = configValue(config, name, definition);
    const [option, optionValue] =
      typeof mapping === 'string' ? [mapping, value] : [mapping.option, (mapping.convert as (value: unknown) => unknown)(value)];
    if (optionValue !== undefined) options[option] = optionValue;
  }
  return options as FlagOptionTargets[Target];
}

const inNetns = (netns: string | undefined) => (netns === undefined ? {} : { netns });

/** The netpol-iptables options the flags give; `netns` runs every iptables and ipset command in that namespace. */
export function firewallOptions(config: AgentConfig, netns?: string): NetpolIptablesOptions {
  return { ...flagOptions('netpol', config), ...inNetns(netns) };
}

/** The netpol-nftables options the flags give (--use-nftables-for-netpol); `netns` runs every nft command there. */
export function nftablesFirewallOptions(config: AgentConfig, netns?: string): NetpolNftablesOptions {
  return { ...firewallOptions(config, netns), ...flagOptions('netpol-nftables', config) };
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
  return { ...flagOptions('proxy-ipvs', config), ...inNetns(netns) };
}

/** The proxy-nftables options the flags give (--use-nftables-for-service-proxy); `netns` runs every command there. */
export function nftablesProxyOptions(config: AgentConfig, netns?: string): ProxyNftablesOptions {
  return { ...flagOptions('proxy-nftables', config), ...inNetns(netns) };
}

/**
 * The service proxy's plugin: proxy-nftables with --use-nftables-for-service-proxy (kernels without IPVS), else
 * proxy-ipvs. Both are the `proxy` controller. `extra` options go to either.
 */
export function proxyPlugins(config: AgentConfig, netns?: string, extra: { minSyncIntervalMs?: number } = {}): PluginEntry[] {
  return config.proxy.useNftables
    ? [{ plugin: proxyNftablesPlugin, options: { ...nftablesProxyOptions(config, netns), ...extra } }]
    : [{ plugin: proxyIpvsPlugin, options: { ...proxyOptions(config, netns), ...extra } }];
}

/** The route-sync options the flags give. */
export function routeSyncOptions(config: AgentConfig): RouteSyncOptions {
  return flagOptions('route-sync', config);
}

/** The routing-bgp options the flags give, with the external peers and the CNI file. */
export function routingBgpOptions(config: AgentConfig): RoutingBgpOptions {
  const { routing } = config;
  return {
    ...flagOptions('routing-bgp', config),
    // Read only with --enable-cni, as kube-router reads it: a stale value must not refuse an agent that ignores it.
    ...(routing.enableCni && routing.cniConfFile !== undefined && { cniConfFile: routing.cniConfFile }),
    peerRouters: usablePeerRouters(routing.peers),
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

/** The flag that enables each feature (the one whose field is `features.<feature>`), for messages. */
export const FEATURE_FLAGS: Readonly<Record<Feature, string>> = Object.fromEntries(
  FEATURES.map((feature) => {
    const entry = Object.entries(FLAGS as Record<string, FlagDefinition>).find(([, d]) => d.config === `features.${feature}`);
    return [feature, `--${entry?.[0]}`];
  }),
) as Record<Feature, string>;

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
