import type { V1Node } from '@kubernetes/client-node';
import type { SyncFailures } from '@kube-router/controller';
import { nodePodCidrs } from '@kube-router/kube';
import type { IpFamily } from '@kube-router/netfilter';
import type { Dataplane } from './dataplane.js';
import type { DesiredVirtualServer, ProxyModel } from './model.js';
import type { ResolvedProxyIpvsOptions } from './options.js';

type FirewallOptions = Pick<ResolvedProxyIpvsOptions, 'podCidrs' | 'ipvsPermitAll' | 'masqueradeAll'>;

/** What a sync of the firewall stage reads besides the model. */
export interface FirewallInputs {
  /** Re-apply everything, not only what changed since the last sync. */
  readonly full: boolean;
  readonly localAddresses: readonly string[];
  readonly node: V1Node | undefined;
}

const isFamily = (family: IpFamily) => (address: string) => address.includes(':') === (family === 'ipv6');

/**
 * The ipsets (local IPs, service IPs, service IP:ports) and the iptables chains (service firewall, masquerade) of each
 * family. A triggered sync re-applies a family's sets or chains only when their content changed since they last
 * applied.
 */
export class FirewallStage {
  readonly #dataplane: Dataplane;
  readonly #families: readonly IpFamily[];
  readonly #options: FirewallOptions;
  readonly #nodeName: string;
  readonly #appliedSets = new Map<IpFamily, string>();
  readonly #appliedChains = new Map<IpFamily, string>();

  constructor(dataplane: Dataplane, families: readonly IpFamily[], options: FirewallOptions, nodeName: string) {
    this.#dataplane = dataplane;
    this.#families = families;
    this.#options = options;
    this.#nodeName = nodeName;
  }

  async reconcile(model: ProxyModel, inputs: FirewallInputs, failures: SyncFailures): Promise<void> {
    const podCidrs = this.#podCidrs(inputs.node, failures);
    for (const family of this.#families) {
      const servers = [...model.virtualServers.values()].filter((server) => isFamily(family)(server.service.address));
      await this.#refreshSets(family, servers, inputs, failures);
      await this.#programChains(family, servers, podCidrs.filter(isFamily(family)), inputs.full, failures);
    }
  }

  /**
   * The pod CIDRs not to masquerade: the configured ones, else the Node's as kube-router reads them. One that does
   * not parse would make iptables-restore refuse every Service's chains: it fails the sync, and the node
   * masquerades all IPVS traffic as it does with no pod CIDR known.
   */
  #podCidrs(node: V1Node | undefined, failures: SyncFailures): readonly string[] {
    if (this.#options.podCidrs.length > 0) return this.#options.podCidrs;
    try {
      return nodePodCidrs(node);
    } catch (error) {
      failures.add(`node/${this.#nodeName}`, error);
      return this.#options.podCidrs;
    }
  }

  async #refreshSets(family: IpFamily, servers: readonly DesiredVirtualServer[], inputs: FirewallInputs, failures: SyncFailures): Promise<void> {
    const members = {
      localIps: inputs.localAddresses.filter(isFamily(family)).sort(),
      serviceIps: [...new Set(servers.map((server) => server.service.address))].sort(),
      serviceIpPorts: [...new Set(servers.map((server) => `${server.service.address},${server.service.protocol}:${server.service.port}`))].sort(),
    };
    await applyOnChange(this.#appliedSets, family, JSON.stringify(members), inputs.full, failures, `ipsets/${family}`, () =>
      this.#dataplane.refreshSets(family, members),
    );
  }

  async #programChains(family: IpFamily, servers: readonly DesiredVirtualServer[], podCidrs: readonly string[], full: boolean, failures: SyncFailures): Promise<void> {
    const chains = {
      permitAll: this.#options.ipvsPermitAll,
      masqueradeAll: this.#options.masqueradeAll,
      podCidrs,
      preserveClient: servers.filter((server) => server.preserveClientAddress),
      hairpin: servers.filter((server) => server.hairpin && server.destinations.length > 0),
    };
    const key = JSON.stringify([
      chains.permitAll,
      chains.masqueradeAll,
      chains.podCidrs,
      chains.preserveClient.map((server) => server.id),
      chains.hairpin.map((server) => [server.id, server.destinations.map((d) => d.address)]),
    ]);
    await applyOnChange(this.#appliedChains, family, key, full, failures, `iptables/${family}`, () => this.#dataplane.programChains(family, chains));
  }
}

/**
 * Runs `apply` on a full sync or when `key` differs from the one that last applied for the family; the key is
 * remembered only once it applied, so that a failure is retried.
 */
async function applyOnChange(
  applied: Map<IpFamily, string>,
  family: IpFamily,
  key: string,
  full: boolean,
  failures: SyncFailures,
  object: string,
  apply: () => Promise<void>,
): Promise<void> {
  if (!full && applied.get(family) === key) return;
  applied.delete(family);
  const ok = await failures.attempt(object, async () => {
    await apply();
    return true;
  });
  if (ok) applied.set(family, key);
}
