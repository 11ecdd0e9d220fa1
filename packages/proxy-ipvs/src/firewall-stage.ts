import type { V1Node } from '@kubernetes/client-node';
import type { SyncFailures } from '@kube-router/controller';
import { nodePodCidrs } from '@kube-router/kube';
import type { IpFamily } from '@kube-router/netfilter';
import { proxySets } from './dataplane.js';
import type { Dataplane, ProxySetsFound } from './dataplane.js';
import { FirewallRecord } from './firewall-record.js';
import type { DesiredVirtualServer, ProxyModel } from './model.js';
import type { ResolvedProxyIpvsOptions } from './options.js';

type FirewallOptions = Pick<ResolvedProxyIpvsOptions, 'podCidrs' | 'ipvsPermitAll' | 'masqueradeAll'>;

/** What a sync of the firewall stage reads besides the model. */
export interface FirewallInputs {
  /** Read back and re-apply everything, not only what changed since the last sync. */
  readonly full: boolean;
  readonly localAddresses: readonly string[];
  readonly node: V1Node | undefined;
}

/** What a full sync found changed behind the proxy and put back: drift, by the kind driftRepaired counts. */
export interface FirewallDrift {
  /** `<family>/<chain>`, or `<family>/<BUILTIN> -j <chain>` for a jump. */
  readonly chain: readonly string[];
  readonly ipset: readonly string[];
}

const isFamily = (family: IpFamily) => (address: string) => address.includes(':') === (family === 'ipv6');

/** ipset prints a host network without its prefix (`10.0.0.1`, not `10.0.0.1/32`): written so, a read-back compares equal. */
function asIpsetSpells(cidr: string, family: IpFamily): string {
  const host = family === 'ipv4' ? '/32' : '/128';
  return cidr.endsWith(host) ? cidr.slice(0, -host.length) : cidr;
}

/**
 * The ipsets (local IPs, service IPs, service IP:ports, LoadBalancer source ranges, services without endpoints) and the iptables chains (service firewall, masquerade) of each
 * family. A triggered sync re-applies a family's sets or chains only when their content changed since they last
 * applied. A full sync reads them back first (its own sets saved by name, one `iptables-save` per table and family),
 * rewrites them all as before, and reports what it found changed since this process wrote it (FirewallRecord).
 */
export class FirewallStage {
  readonly #dataplane: Dataplane;
  readonly #families: readonly IpFamily[];
  readonly #options: FirewallOptions;
  readonly #nodeName: string;
  readonly #appliedSets = new Map<IpFamily, string>();
  /** What the family's sets were last written (or found unchanged) from: a triggered sync that finds the same skips them. */
  readonly #setInputs = new Map<IpFamily, { readonly servers: readonly DesiredVirtualServer[]; readonly localAddresses: readonly string[] }>();
  readonly #appliedChains = new Map<IpFamily, string>();
  readonly #record = new FirewallRecord();

  constructor(dataplane: Dataplane, families: readonly IpFamily[], options: FirewallOptions, nodeName: string) {
    this.#dataplane = dataplane;
    this.#families = families;
    this.#options = options;
    this.#nodeName = nodeName;
  }

  async reconcile(model: ProxyModel, inputs: FirewallInputs, failures: SyncFailures): Promise<FirewallDrift> {
    const podCidrs = this.#podCidrs(inputs.node, failures);
    const sets = inputs.full ? await failures.attempt('ipsets', () => this.#dataplane.readSets()) : undefined;
    const drift: { chain: string[]; ipset: string[] } = { chain: [], ipset: [] };
    for (const family of this.#families) {
      const servers = [...model.virtualServers.values()].filter((server) => isFamily(family)(server.service.address));
      drift.ipset.push(...(await this.#refreshSets(family, servers, inputs, sets, failures)));
      drift.chain.push(...(await this.#programChains(family, servers, podCidrs.filter(isFamily(family)), inputs.full, failures)));
    }
    return drift;
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

  /** Writes the family's sets when due; returns those a read-back found changed and this write put back. */
  async #refreshSets(
    family: IpFamily,
    servers: readonly DesiredVirtualServer[],
    inputs: FirewallInputs,
    found: ProxySetsFound | undefined,
    failures: SyncFailures,
  ): Promise<readonly string[]> {
    // The members of 10,000 Services are 10,000s of strings to sort and compare: a triggered sync whose virtual servers
    // are the same objects (the model's cache) or differ in nothing the sets hold (an endpoint changed) skips it.
    const last = this.#setInputs.get(family);
    if (!inputs.full && last && sameSetInputs(last, servers, inputs.localAddresses)) return [];
    this.#setInputs.delete(family);
    const ipPort = (server: DesiredVirtualServer) => `${server.service.address},${server.service.protocol}:${server.service.port}`;
    const firewalled = servers.filter((server) => server.sourceRanges !== undefined);
    const members = {
      localIps: inputs.localAddresses.filter(isFamily(family)).sort(),
      serviceIps: [...new Set(servers.map((server) => server.service.address))].sort(),
      serviceIpPorts: [...new Set(servers.map(ipPort))].sort(),
      lbFirewall: firewalled.map(ipPort).sort(),
      lbSourceRanges: firewalled.flatMap((server) => (server.sourceRanges ?? []).map((range) => `${ipPort(server)},${asIpsetSpells(range, family)}`)).sort(),
      noEndpoints: servers.filter((server) => server.noEndpoints === 'reject').map(ipPort).sort(),
      noLocalEndpoints: servers.filter((server) => server.noEndpoints === 'drop').map(ipPort).sort(),
    };
    const names = proxySets(family, members).map((set) => set.name);
    const drift = found ? this.#record.setDrift(names, found.sets) : [];
    const written = await applyOnChange(this.#appliedSets, family, JSON.stringify(members), inputs.full, failures, `ipsets/${family}`, () =>
      this.#dataplane.refreshSets(family, members, found?.names),
    );
    if (written === 'failed') this.#record.forgetSets(names);
    else this.#setInputs.set(family, { servers, localAddresses: inputs.localAddresses });
    if (written === 'unchanged' || written === 'failed') return [];
    this.#record.setsWritten(written);
    return drift;
  }

  /** Writes the family's chains when due; returns the chains and jumps a read-back found changed and this write put back. */
  async #programChains(
    family: IpFamily,
    servers: readonly DesiredVirtualServer[],
    podCidrs: readonly string[],
    full: boolean,
    failures: SyncFailures,
  ): Promise<readonly string[]> {
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
    const object = `iptables/${family}`;
    const found = full ? await failures.attempt(object, () => this.#dataplane.readChains(family)) : undefined;
    const drift = found ? this.#record.chainDrift(family, found) : { names: [], changedInPlace: [] };
    const written = await applyOnChange(this.#appliedChains, family, key, full, failures, object, () => this.#dataplane.programChains(family, chains, found));
    if (written === 'failed') this.#record.forgetChains(family);
    if (written === 'unchanged' || written === 'failed') return [];
    this.#record.chainsWritten(family, written);
    if (drift.changedInPlace.length > 0) {
      // Rare (someone edited our rules): one more read, so that the spelling recorded is that of our own rules.
      const now = await this.#dataplane.readChains(family).catch(() => undefined);
      if (now) this.#record.recordSpelling(family, now, drift.changedInPlace);
      else this.#record.forgetChains(family);
    }
    return drift.names;
  }
}

/**
 * Runs `apply` on a full sync or when `key` differs from the one that last applied for the family, and resolves
 * with what it returned; the key is remembered only once it applied, so that a failure is retried.
 */
async function applyOnChange<T>(
  applied: Map<IpFamily, string>,
  family: IpFamily,
  key: string,
  full: boolean,
  failures: SyncFailures,
  object: string,
  apply: () => Promise<T>,
): Promise<T | 'unchanged' | 'failed'> {
  if (!full && applied.get(family) === key) return 'unchanged';
  applied.delete(family);
  const result = await failures.attempt(object, async () => ({ value: await apply() }));
  if (!result) return 'failed';
  applied.set(family, key);
  return result.value;
}

/** Whether the sets would hold the same members: the same virtual servers in the same order, alike in what the sets take. */
function sameSetInputs(
  last: { readonly servers: readonly DesiredVirtualServer[]; readonly localAddresses: readonly string[] },
  servers: readonly DesiredVirtualServer[],
  localAddresses: readonly string[],
): boolean {
  if (last.servers.length !== servers.length || last.localAddresses.join() !== localAddresses.join()) return false;
  return servers.every((server, index) => {
    const before = last.servers[index]!;
    return (
      server === before ||
      (server.service.address === before.service.address &&
        server.service.protocol === before.service.protocol &&
        server.service.port === before.service.port &&
        server.noEndpoints === before.noEndpoints &&
        (server.sourceRanges ?? []).join() === (before.sourceRanges ?? []).join() &&
        (server.sourceRanges === undefined) === (before.sourceRanges === undefined))
    );
  });
}
