import { lballocPlugin } from '@kube-router/lballoc';
import { netpolIptablesPlugin, type NetpolIptablesOptions } from '@kube-router/netpol-iptables';
import type { PluginEntry } from './assembly.js';
import { FEATURES, type AgentConfig, type Feature } from './flags.js';

/**
 * Builds the plugins of one feature from the agent's configuration: the flags become plugin options here, so that
 * plugins never see the command line. A feature may need several plugins (the router: BGP and route sync).
 */
export type PluginFactory = (config: AgentConfig) => readonly PluginEntry[];

/** Which plugins implement which --run-* feature. */
export type PluginCatalog = Readonly<Partial<Record<Feature, PluginFactory>>>;

/** The reference assembly's catalog: the flags of each feature become its plugins' options here. */
export const defaultCatalog: PluginCatalog = {
  firewall: (config) => [{ plugin: netpolIptablesPlugin, options: firewallOptions(config) }],
  loadbalancer: (config) => [
    {
      plugin: lballocPlugin,
      options: {
        ranges: config.loadbalancer.ipRanges,
        defaultClass: config.loadbalancer.defaultClass,
        syncPeriodMs: config.syncPeriodsMs.loadbalancer,
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
    syncPeriodMs: config.syncPeriodsMs.iptables,
    serviceClusterIpRanges: config.firewall.serviceClusterIpRanges,
    serviceExternalIpRanges: config.firewall.serviceExternalIpRanges,
    nodePortRange: config.firewall.nodePortRange,
    ...(netns !== undefined && { netns }),
  };
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
