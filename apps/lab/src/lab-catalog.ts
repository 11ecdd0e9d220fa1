import { defaultCatalog, firewallPlugins, type PluginCatalog } from '@kube-router/agent';

export interface LabCatalogOptions {
  /** The lab node's network namespace: the dataplane plugins program their rules inside it. */
  netns: string | undefined;
}

/** The reference catalog, with the dataplane pointed at the lab node's network namespace. */
export function labCatalog({ netns }: LabCatalogOptions): PluginCatalog {
  if (netns === undefined) {
    const { firewall: _noDataplane, ...rest } = defaultCatalog;
    return rest;
  }
  return {
    ...defaultCatalog,
    // Triggered syncs as soon as a policy or pod changes, so that `kubectl apply` is enforced within a second;
    // --use-nftables-for-netpol picks the nftables backend as in the agent.
    firewall: (config) => firewallPlugins(config, netns, { minSyncIntervalMs: 200 }),
  };
}
