import { deleteConntrackEntries, IpRoute2, Ipset, IpsetScript, Iptables, Ipvsadm, Mutex, renderIptablesRestore } from '@kube-router/netfilter';
import type { CommandRunner, ConntrackFilter, IpFamily, IpsetSpec, IpvsVirtualServer, SavedChain, SavedIpset, SavedTable } from '@kube-router/netfilter';
import {
  DUMMY_INTERFACE,
  FIREWALL_CHAIN,
  LB_FIREWALL_SET,
  LB_SOURCE_RANGES_SET,
  LOCAL_IPS_SET,
  MASQUERADE_CHAIN,
  NO_ENDPOINTS_SET,
  NO_LOCAL_ENDPOINTS_SET,
  SERVICE_IPS_SET,
  SERVICE_IP_PORTS_SET,
  familySetName,
} from './names.js';
import type { DesiredVirtualServer } from './model.js';

export interface DataplaneOptions {
  readonly runner: CommandRunner;
  readonly netns?: string;
  readonly timeoutMs: number;
  readonly families: readonly IpFamily[];
  readonly iptablesBackend: 'default' | 'nft' | 'legacy';
}

/** kube-router's sysctls for IPVS (ipvs-sysctl.txt) and for VIPs on a dummy interface (kubernetes#70530). */
export const PROXY_SYSCTLS: readonly (readonly [string, string])[] = [
  ['net.ipv4.vs.conntrack', '1'],
  ['net.ipv4.vs.expire_nodest_conn', '1'],
  ['net.ipv4.vs.expire_quiescent_template', '1'],
  ['net.ipv4.vs.conn_reuse_mode', '0'],
  ['net.ipv4.conf.all.arp_ignore', '1'],
  ['net.ipv4.conf.all.arp_announce', '2'],
];

const INPUT_JUMP_COMMENT = 'handle traffic to IPVS service IPs in custom chain';
const MASQ_JUMP_COMMENT = 'kube-router IPVS masquerade';
/** The jumps into our chains, as drift names them. */
const INPUT_JUMP = `INPUT -j ${FIREWALL_CHAIN}`;
const MASQ_JUMP = `POSTROUTING -j ${MASQUERADE_CHAIN}`;

/** The members of a family's sets. */
export interface ProxySetMembers {
  readonly localIps: readonly string[];
  readonly serviceIps: readonly string[];
  readonly serviceIpPorts: readonly string[];
  /** `ip,proto:port` of LoadBalancer IPs that admit only their loadBalancerSourceRanges. */
  readonly lbFirewall: readonly string[];
  /** `ip,proto:port,network`: a range a LoadBalancer IP admits. */
  readonly lbSourceRanges: readonly string[];
  /** `ip,proto:port` of virtual services whose Service port has no usable endpoint: new connections rejected. */
  readonly noEndpoints: readonly string[];
  /** `ip,proto:port` of virtual services with no local endpoint under the Local policy: new connections dropped. */
  readonly noLocalEndpoints: readonly string[];
}

/** Every set name of the proxy, without the family prefix. */
export const PROXY_SET_BASES = [LOCAL_IPS_SET, SERVICE_IPS_SET, SERVICE_IP_PORTS_SET, LB_FIREWALL_SET, LB_SOURCE_RANGES_SET, NO_ENDPOINTS_SET, NO_LOCAL_ENDPOINTS_SET] as const;

/** A set as refreshSets wrote it. */
export interface ProxySetWritten {
  readonly name: string;
  readonly members: readonly string[];
}

/** What `ipset save` holds, read once for every family: our sets by name, and the names of all sets. */
export interface ProxySetsFound {
  readonly sets: ReadonlyMap<string, SavedIpset>;
  readonly names: ReadonlySet<string>;
}

/** Our two chains of a family as iptables-save printed them (when present), and which of our jumps into them it has. */
export interface ProxyChainsFound {
  readonly chains: ReadonlyMap<string, SavedChain>;
  /** `INPUT -j KUBE-ROUTER-SERVICES`, `POSTROUTING -j KUBE-ROUTER-SVC-MASQ`. */
  readonly jumps: ReadonlySet<string>;
}

/** What programChains wrote: each chain's rules as rendered, and the jumps in place after it. */
export interface ProxyChainsWritten {
  readonly chains: readonly { readonly name: string; readonly rules: readonly string[] }[];
  readonly jumps: readonly string[];
}

/** The sets of one family and the members they are to hold. */
export function proxySets(family: IpFamily, members: ProxySetMembers): (ProxySetWritten & { readonly type: IpsetSpec['type'] })[] {
  return [
    { name: familySetName(LOCAL_IPS_SET, family), type: 'hash:ip', members: members.localIps },
    { name: familySetName(SERVICE_IPS_SET, family), type: 'hash:ip', members: members.serviceIps },
    { name: familySetName(SERVICE_IP_PORTS_SET, family), type: 'hash:ip,port', members: members.serviceIpPorts },
    { name: familySetName(LB_FIREWALL_SET, family), type: 'hash:ip,port', members: members.lbFirewall },
    { name: familySetName(LB_SOURCE_RANGES_SET, family), type: 'hash:ip,port,net', members: members.lbSourceRanges },
    { name: familySetName(NO_ENDPOINTS_SET, family), type: 'hash:ip,port', members: members.noEndpoints },
    { name: familySetName(NO_LOCAL_ENDPOINTS_SET, family), type: 'hash:ip,port', members: members.noLocalEndpoints },
  ];
}

/** The kernel tools of the proxy, each a thin wrapper over a netfilter runner, one place that knows their syntax. */
export class Dataplane {
  readonly ipvs: Ipvsadm;
  /**
   * Reads IPVS's connection table for `kube-router explain`: a lock of its own, so that a request never waits behind
   * a sync's writes (nor holds them up while a long table is listed); reading needs no turn with the writers.
   */
  readonly ipvsConnections: Ipvsadm;
  readonly ip: IpRoute2;
  readonly ipset: Ipset;
  readonly iptables: Partial<Record<IpFamily, Iptables>>;
  readonly #options: DataplaneOptions;

  constructor(options: DataplaneOptions) {
    this.#options = options;
    const common = { runner: options.runner, timeoutMs: options.timeoutMs, ...(options.netns !== undefined && { netns: options.netns }) };
    this.ipvs = new Ipvsadm(common);
    this.ipvsConnections = new Ipvsadm({ ...common, lock: new Mutex() });
    this.ip = new IpRoute2(common);
    this.ipset = new Ipset(common);
    this.iptables = {};
    for (const family of options.families) {
      this.iptables[family] = new Iptables({ ...common, family, backend: options.iptablesBackend });
    }
  }

  async setSysctl(key: string, value: string): Promise<void> {
    await this.#options.runner.run({
      command: 'sysctl',
      args: ['-w', `${key}=${value}`],
      timeoutMs: this.#options.timeoutMs,
      ...(this.#options.netns !== undefined && { netns: this.#options.netns }),
    });
  }

  /** kube-dummy-if exists and is up; returns its addresses by family. */
  async ensureDummyInterface(): Promise<Record<IpFamily, Set<string>>> {
    const links = await this.ip.links();
    if (!links.some((link) => link.ifname === DUMMY_INTERFACE)) {
      await this.ip.run(['link', 'add', DUMMY_INTERFACE, 'type', 'dummy']);
    }
    await this.ip.run(['link', 'set', DUMMY_INTERFACE, 'up']);
    return this.dummyAddresses();
  }

  async dummyAddresses(): Promise<Record<IpFamily, Set<string>>> {
    const out: Record<IpFamily, Set<string>> = { ipv4: new Set(), ipv6: new Set() };
    for (const link of await this.ip.addresses(DUMMY_INTERFACE)) {
      for (const info of link.addr_info) {
        if (info.scope === 'link') continue;
        out[info.family === 'inet6' ? 'ipv6' : 'ipv4'].add(info.local);
      }
    }
    return out;
  }

  /** Every address of the node except the VIPs on kube-dummy-if: what kube-router-local-ips holds. */
  async localAddresses(): Promise<string[]> {
    const out: string[] = [];
    for (const link of await this.ip.addresses()) {
      if (link.ifname === DUMMY_INTERFACE) continue;
      for (const info of link.addr_info) if (info.scope !== 'link') out.push(info.local);
    }
    return out;
  }

  /** Adds and removes VIPs one command each; returns the failed ones with their error. */
  async changeVips(add: readonly string[], remove: readonly string[]): Promise<Map<string, Error>> {
    const commands = [
      ...add.map((ip) => ({ ip, command: `address add ${ip}/${ip.includes(':') ? 128 : 32} dev ${DUMMY_INTERFACE}` })),
      ...remove.map((ip) => ({ ip, command: `address del ${ip}/${ip.includes(':') ? 128 : 32} dev ${DUMMY_INTERFACE}` })),
    ];
    const failures = new Map<string, Error>();
    for (const failure of await this.ip.batchEach(commands.map((c) => c.command))) {
      const ip = commands[failure.line - 1]?.ip;
      if (ip !== undefined) failures.set(ip, failure.error);
    }
    return failures;
  }

  /**
   * Replaces the members of the three sets of one family, atomically each. `existing`, the names of the sets in the
   * kernel when a read-back just listed them, spares asking again.
   */
  async refreshSets(family: IpFamily, members: ProxySetMembers, existing?: ReadonlySet<string>): Promise<ProxySetWritten[]> {
    const sets = proxySets(family, members);
    const names = existing ?? new Set(await this.ipset.listNames());
    const script = new IpsetScript();
    for (const { name, type, members: elements } of sets) {
      const tempName = `${name}-t`;
      if (names.has(tempName)) script.destroy(tempName);
      const spec: IpsetSpec = { name, type, family, maxElements: Math.max(65_536, elements.length * 2) };
      script.replaceMembers(spec, elements, { tempName, createTarget: !names.has(name) });
    }
    await this.ipset.restore(script);
    return sets.map(({ name, members: written }) => ({ name, members: written }));
  }

  /** The read-back of a full sync, for every family at once: our sets saved by name, and every set's name. */
  async readSets(): Promise<ProxySetsFound> {
    const ours = new Set(this.#options.families.flatMap((family) => PROXY_SET_BASES.map((base) => familySetName(base, family))));
    const { sets, names } = await this.ipset.saveOwn((name) => ours.has(name));
    return { sets: new Map(sets.map((set) => [set.name, set])), names: new Set(names) };
  }

  /** One `iptables-save` of the filter table and one of nat: our chains in them and the jumps into them. */
  async readChains(family: IpFamily): Promise<ProxyChainsFound> {
    const iptables = this.#iptables(family);
    const filter = await iptables.saveParsed('filter');
    const nat = await iptables.saveParsed('nat');
    const chains = new Map<string, SavedChain>();
    for (const chain of [...filter.chains, ...nat.chains]) {
      if (chain.name === FIREWALL_CHAIN || chain.name === MASQUERADE_CHAIN) chains.set(chain.name, chain);
    }
    const rulesOf = (table: SavedTable, name: string) => table.chains.find((chain) => chain.name === name)?.rules ?? [];
    const svip = familySetName(SERVICE_IPS_SET, family);
    const jumps = new Set<string>();
    if (rulesOf(filter, 'INPUT').some((rule) => rule.target === FIREWALL_CHAIN && rule.comment === INPUT_JUMP_COMMENT && rule.args.includes(svip))) {
      jumps.add(INPUT_JUMP);
    }
    if (rulesOf(nat, 'POSTROUTING').some((rule) => rule.target === MASQUERADE_CHAIN && rule.comment === MASQ_JUMP_COMMENT)) jumps.add(MASQ_JUMP);
    return { chains, jumps };
  }

  /**
   * The filter chain KUBE-ROUTER-SERVICES (with --ipvs-permit-all, kube-router's rules: ICMP and known service
   * ports accepted, anything else to a service IP that is not a node address rejected) and the nat chain of IPVS
   * masquerading, each jumped to from its built-in chain once. `found`, a read-back of this sync, says which jumps
   * are there; without one, `iptables -C` does.
   */
  async programChains(
    family: IpFamily,
    chains: {
      permitAll: boolean;
      masqueradeAll: boolean;
      podCidrs: readonly string[];
      preserveClient: readonly DesiredVirtualServer[];
      hairpin: readonly DesiredVirtualServer[];
    },
    found?: ProxyChainsFound,
  ): Promise<ProxyChainsWritten> {
    const iptables = this.#iptables(family);
    const svip = familySetName(SERVICE_IPS_SET, family);
    const svipPort = familySetName(SERVICE_IP_PORTS_SET, family);
    const localIps = familySetName(LOCAL_IPS_SET, family);
    const icmp = family === 'ipv4' ? ['-p icmp --icmp-type echo-request', '-p icmp --icmp-type destination-unreachable', '-p icmp --icmp-type time-exceeded'] : ['-p ipv6-icmp --icmpv6-type echo-request', '-p ipv6-icmp --icmpv6-type destination-unreachable', '-p ipv6-icmp --icmpv6-type packet-too-big', '-p ipv6-icmp --icmpv6-type time-exceeded'];
    const reject = family === 'ipv4' ? 'icmp-port-unreachable' : 'icmp6-port-unreachable';
    const set = (base: string) => familySetName(base, family);
    // Before kube-router's permit-all rules, whatever the flag: Kubernetes' semantics of every Service. Only new
    // connections are refused, so that what drains from a removed endpoint finishes.
    const serviceRules = [
      `-m comment --comment "drop LoadBalancer traffic from outside loadBalancerSourceRanges" -m set --match-set ${set(LB_FIREWALL_SET)} dst,dst -m set ! --match-set ${set(LB_SOURCE_RANGES_SET)} dst,dst,src -j DROP`,
      `-m comment --comment "reject new connections to services without endpoints" -p tcp -m set --match-set ${set(NO_ENDPOINTS_SET)} dst,dst -m conntrack --ctstate NEW -j REJECT --reject-with tcp-reset`,
      `-m comment --comment "reject new connections to services without endpoints" -m set --match-set ${set(NO_ENDPOINTS_SET)} dst,dst -m conntrack --ctstate NEW -j REJECT --reject-with ${reject}`,
      `-m comment --comment "drop new connections to services without local endpoints" -m set --match-set ${set(NO_LOCAL_ENDPOINTS_SET)} dst,dst -m conntrack --ctstate NEW -j DROP`,
    ];
    const filterRules = [
      ...serviceRules,
      ...(chains.permitAll
      ? [
          ...icmp.map((rule) => `-m comment --comment "allow icmp to ipvs services" ${rule} -j ACCEPT`),
          `-m comment --comment "allow input traffic to ipvs services" -m set --match-set ${svipPort} dst,dst -j ACCEPT`,
          // The node's own connection to a Service address leaves with that address as its source, and one to a local
          // endpoint is not masqueraded: the endpoint's answer comes back to the service IP on the client's port.
          // kube-router's firewall accepts it first (its stateful rule); a proxy-only node must not reject it here.
          `-m comment --comment "allow replies to connections from service IPs" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
          `-m comment --comment "reject all unexpected traffic to service IPs" -m set ! --match-set ${localIps} dst -j REJECT --reject-with ${reject}`,
        ]
      : []),
    ];
    const inputJump = ['-m', 'comment', '--comment', INPUT_JUMP_COMMENT, '-m', 'set', '--match-set', svip, 'dst', '-j', FIREWALL_CHAIN];
    // Hairpin first: a pod that reaches itself through a VIP would get its own address as the source, which it drops.
    const hostBits = family === 'ipv4' ? 32 : 128;
    const hairpinRules = chains.hairpin.flatMap((server) =>
      server.destinations.map(
        (d) =>
          `-s ${d.address}/${hostBits} -d ${d.address}/${hostBits} -m ipvs --vaddr ${server.service.address}/${hostBits} --vport ${server.service.port} --vproto ${server.service.protocol} -j SNAT --to-source ${server.service.address}`,
      ),
    );
    // kube-router's SNAT rule per pod CIDR (`! -s <cidr> ! -d <cidr>`): traffic from a local pod keeps its address, and so
    // does an outside client whose connection lands on a local endpoint (the reply leaves through this node's IPVS
    // anyway); only traffic between two places off this node's pods is masqueraded, so that its reply comes back here.
    const masquerade = `-m ipvs --ipvs --vdir ORIGINAL --vmethod MASQ -j MASQUERADE${(await iptables.hasRandomFully()) ? ' --random-fully' : ''}`;
    const masqRules = [
      ...hairpinRules,
      ...chains.preserveClient.map((server) => `-m ipvs --vaddr ${server.service.address} --vport ${server.service.port} --vproto ${server.service.protocol} -j RETURN`),
      ...(chains.masqueradeAll || chains.podCidrs.length === 0
        ? [masquerade]
        : [
            ...chains.podCidrs.flatMap((cidr) => [
              `-s ${cidr} -m ipvs --ipvs --vdir ORIGINAL --vmethod MASQ -j RETURN`,
              `-d ${cidr} -m ipvs --ipvs --vdir ORIGINAL --vmethod MASQ -j RETURN`,
            ]),
            masquerade,
          ]),
    ];
    const masqJump = ['-m', 'comment', '--comment', MASQ_JUMP_COMMENT, '-j', MASQUERADE_CHAIN];
    await iptables.restore(
      renderIptablesRestore([
        { table: 'filter', chains: [{ name: FIREWALL_CHAIN, rules: filterRules }] },
        { table: 'nat', chains: [{ name: MASQUERADE_CHAIN, rules: masqRules }] },
      ]),
    );
    // The jumps are checked once the chains exist (`iptables -C` fails on a jump to a missing chain).
    const hasJump = async (spec: string, table: string, chain: string, rule: readonly string[]) => (found ? found.jumps.has(spec) : iptables.hasRule(table, chain, rule));
    // Jumped to whatever --ipvs-permit-all says: the chain always holds the rules of every Service above.
    const filterLines = (await hasJump(INPUT_JUMP, 'filter', 'INPUT', inputJump)) ? [] : [`-I INPUT 1 ${quoteRule(inputJump)}`];
    const natLines = (await hasJump(MASQ_JUMP, 'nat', 'POSTROUTING', masqJump)) ? [] : [`-A POSTROUTING ${quoteRule(masqJump)}`];
    if (filterLines.length > 0 || natLines.length > 0) {
      await iptables.restore(
        renderIptablesRestore([
          { table: 'filter', chains: [], lines: filterLines },
          { table: 'nat', chains: [], lines: natLines },
        ]),
      );
    }
    return {
      chains: [
        { name: FIREWALL_CHAIN, rules: filterRules },
        { name: MASQUERADE_CHAIN, rules: masqRules },
      ],
      jumps: [INPUT_JUMP, MASQ_JUMP],
    };
  }

  /** `conntrack -D` of the flows a filter names; how many the kernel deleted. */
  async deleteConntrack(filter: ConntrackFilter): Promise<number> {
    const result = await deleteConntrackEntries(this.#options.runner, filter, {
      timeoutMs: this.#options.timeoutMs,
      ...(this.#options.netns !== undefined && { netns: this.#options.netns }),
    });
    return result.deleted;
  }

  #iptables(family: IpFamily): Iptables {
    const iptables = this.iptables[family];
    if (!iptables) throw new Error(`no ${family} iptables configured`);
    return iptables;
  }

  /** Removes the chains, their jumps, the sets, the VIPs and kube-dummy-if: the plugin's cleanup. */
  async removeEverything(isExcluded: (address: string) => boolean, saved: readonly IpvsVirtualServer[]): Promise<Error[]> {
    const errors: Error[] = [];
    const attempt = async (step: () => Promise<unknown>) => {
      try {
        await step();
      } catch (error) {
        errors.push(error as Error);
      }
    };
    const ours = saved.filter((server) => !isExcluded(server.service.address));
    await attempt(() => this.ipvs.restore(ours.map((server) => `-D ${protocolFlag(server)} ${hostPort(server.service.address, server.service.port)}`)));
    for (const iptables of Object.values(this.iptables)) {
      if (!iptables) continue;
      const svip = familySetName(SERVICE_IPS_SET, iptables.family);
      const inputJump = ['-m', 'comment', '--comment', INPUT_JUMP_COMMENT, '-m', 'set', '--match-set', svip, 'dst', '-j', FIREWALL_CHAIN];
      const masqJump = ['-m', 'comment', '--comment', MASQ_JUMP_COMMENT, '-j', MASQUERADE_CHAIN];
      await attempt(async () => {
        // `iptables -C` of a rule naming a missing set fails, so the saved tables say first whether a jump is there.
        let save = { filter: await iptables.save('filter'), nat: await iptables.save('nat') };
        if (save.filter.includes(INPUT_JUMP_COMMENT)) {
          while (await iptables.hasRule('filter', 'INPUT', inputJump)) await iptables.run(['-t', 'filter', '-D', 'INPUT', ...inputJump]);
        }
        if (save.nat.includes(MASQ_JUMP_COMMENT)) {
          while (await iptables.hasRule('nat', 'POSTROUTING', masqJump)) await iptables.run(['-t', 'nat', '-D', 'POSTROUTING', ...masqJump]);
        }
        save = { filter: await iptables.save('filter'), nat: await iptables.save('nat') };
        const tables = [
          ...(save.filter.includes(`:${FIREWALL_CHAIN} `) ? [{ table: 'filter', chains: [], deleteChains: [FIREWALL_CHAIN] }] : []),
          ...(save.nat.includes(`:${MASQUERADE_CHAIN} `) ? [{ table: 'nat', chains: [], deleteChains: [MASQUERADE_CHAIN] }] : []),
        ];
        if (tables.length > 0) await iptables.restore(renderIptablesRestore(tables));
      });
    }
    await attempt(async () => {
      const names = new Set(await this.ipset.listNames());
      const script = new IpsetScript();
      for (const family of ['ipv4', 'ipv6'] as const) {
        for (const base of PROXY_SET_BASES) {
          const name = familySetName(base, family);
          if (names.has(name)) script.destroy(name);
        }
      }
      await this.ipset.restore(script);
    });
    await attempt(async () => {
      const links = await this.ip.links();
      if (!links.some((link) => link.ifname === DUMMY_INTERFACE)) return;
      const addresses = await this.dummyAddresses();
      const kept = [...addresses.ipv4, ...addresses.ipv6].filter(isExcluded);
      if (kept.length === 0) await this.ip.run(['link', 'del', DUMMY_INTERFACE]);
      else await this.changeVips([], [...addresses.ipv4, ...addresses.ipv6].filter((ip) => !isExcluded(ip)));
    });
    return errors;
  }
}

function protocolFlag(server: IpvsVirtualServer): string {
  return { tcp: '-t', udp: '-u', sctp: '--sctp-service' }[server.service.protocol];
}

function hostPort(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}

function quoteRule(words: readonly string[]): string {
  return words.map((word) => (/^[\w@%+=:,./!-]+$/.test(word) ? word : `"${word}"`)).join(' ');
}
