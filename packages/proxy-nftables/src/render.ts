import { usesClusterEndpoints, usesLocalEndpoints } from '@kube-router/kube';
import type { IpFamily, ServiceEndpoint } from '@kube-router/kube';
import type { ServicePortPlan } from './model.js';
import { CHAINS, COUNTER_PREFIX, MAPS, MASQUERADE_MARK, NODEPORT_IPS_SET, PREFIX, endpointBase, hashedName, servicePortBase } from './names.js';
import type { CounterKind, MapName } from './names.js';

/**
 * What one family's table holds, as text: the fixed part (base chains, helper chains, map and set declarations), the
 * per-Service chains with their rules, the map elements and the affinity sets. The writer diffs two of these to write
 * only what changed, and compares one with the kernel's listing to find drift.
 */
export interface TableState {
  /** The fixed part's script lines (without the table's name prefix applied; see renderBase). */
  readonly base: readonly string[];
  readonly nodePortIps: ReadonlySet<string>;
  /** What each Service (`namespace/name`) puts in the table; an unchanged Service keeps its object (RenderCache). */
  readonly fragments: ReadonlyMap<string, Fragment>;
  /** Per-Service chains → their rules, in order (all fragments', merged when first read). */
  readonly chains: ReadonlyMap<string, readonly string[]>;
  /** Map → key → verdict, in nft's text notation (`10.96.0.1 . tcp . 80` → `goto service-…`). */
  readonly maps: Readonly<Record<MapName, ReadonlyMap<string, string>>>;
  /** Affinity sets → timeout in seconds. */
  readonly affinitySets: ReadonlyMap<string, number>;
  /** Named counters → the Service address they count (all fragments', merged when first read). */
  readonly counters: ReadonlyMap<string, ServiceCounter>;
  /** Rules of each fixed chain, for drift checks. */
  readonly baseRuleCounts: ReadonlyMap<string, number>;
}

/** One Service's part of a table: its chains, its map elements and its affinity sets. */
export interface Fragment {
  readonly chains: ReadonlyMap<string, readonly string[]>;
  /** `[map, key, verdict]`. */
  readonly elements: readonly (readonly [MapName, string, string])[];
  readonly affinitySets: ReadonlyMap<string, number>;
  /** Named counters of the Service's addresses (three per address: connections, in, out). */
  readonly counters: ReadonlyMap<string, ServiceCounter>;
}

/**
 * What one named counter counts: a Service address as proxy-ipvs's virtual server (cluster IP, external IP,
 * LoadBalancer IP or a node address with the NodePort) and which of kube-router's series it feeds.
 */
export interface ServiceCounter {
  readonly kind: CounterKind;
  /** `namespace/name`. */
  readonly owner: string;
  readonly address: string;
  readonly protocol: string;
  readonly port: number;
}

/** Renderings by the plan arrays they came from (ProxyModel.groups keeps an unchanged Service's array). */
export type RenderCache = WeakMap<readonly ServicePortPlan[], { readonly key: string; readonly fragment: Fragment }>;

export function createRenderCache(): RenderCache {
  return new WeakMap();
}

export interface RenderOptions {
  readonly family: IpFamily;
  /** Traffic from these is not masqueraded (their family's CIDRs); empty: no pod detection (see masqueradeAll). */
  readonly podCidrs: readonly string[];
  readonly masqueradeAll: boolean;
  readonly nodePortBindOnAllIp: boolean;
}

interface BaseChain {
  readonly name: string;
  readonly type: 'filter' | 'nat';
  readonly hook: string;
  readonly priority: number;
}

/** kube-proxy's base chains: the filter ones before DNAT (dstnat - 10), so that they see the Service address. */
const BASE_CHAINS: readonly BaseChain[] = [
  { name: CHAINS.filterPrerouting, type: 'filter', hook: 'prerouting', priority: -110 },
  { name: CHAINS.filterInput, type: 'filter', hook: 'input', priority: -110 },
  { name: CHAINS.filterForward, type: 'filter', hook: 'forward', priority: -110 },
  { name: CHAINS.filterOutput, type: 'filter', hook: 'output', priority: -110 },
  { name: CHAINS.natPrerouting, type: 'nat', hook: 'prerouting', priority: -100 },
  { name: CHAINS.natOutput, type: 'nat', hook: 'output', priority: -100 },
  { name: CHAINS.natPostrouting, type: 'nat', hook: 'postrouting', priority: 100 },
  // After srcnat (100): a reply has its Service address back as source here, whichever way it leaves.
  { name: CHAINS.countersInput, type: 'filter', hook: 'input', priority: 300 },
  { name: CHAINS.countersPostrouting, type: 'filter', hook: 'postrouting', priority: 300 },
];

/** The fixed regular chains, each flushed and refilled whenever the base is written. */
export const FIXED_CHAINS: readonly string[] = [
  CHAINS.services,
  CHAINS.masquerading,
  CHAINS.markForMasquerade,
  CHAINS.endpointsCheck,
  CHAINS.firewallCheck,
  CHAINS.reject,
];

const ALL_MAPS: readonly MapName[] = Object.values(MAPS);

function ipOf(family: IpFamily): 'ip' | 'ip6' {
  return family === 'ipv4' ? 'ip' : 'ip6';
}

function addrType(family: IpFamily): string {
  return family === 'ipv4' ? 'ipv4_addr' : 'ipv6_addr';
}

/**
 * The fixed part as `[chain-or-object, statement]` lines of nft script with `T` standing for `<family> <table>`. The
 * rules of each fixed chain are listed after its flush so that writing it is idempotent.
 */
export function renderBase(options: RenderOptions): { lines: string[]; ruleCounts: Map<string, number> } {
  const ip = ipOf(options.family);
  const addr = addrType(options.family);
  const noLocalhost = options.family === 'ipv4' ? 'ip daddr != 127.0.0.0/8' : 'ip6 daddr != ::1';
  const nodePortMatch = options.nodePortBindOnAllIp ? `fib daddr type local ${noLocalhost}` : `${ip} daddr @${NODEPORT_IPS_SET}`;
  const lines: string[] = ['add table T'];
  for (const chain of BASE_CHAINS) lines.push(`add chain T ${chain.name} { type ${chain.type} hook ${chain.hook} priority ${chain.priority} ; policy accept ; }`);
  for (const chain of FIXED_CHAINS) lines.push(`add chain T ${chain}`);
  lines.push(`add set T ${NODEPORT_IPS_SET} { type ${addr} ; comment "addresses that accept NodePort traffic" ; }`);
  lines.push(`add map T ${MAPS.serviceIps} { type ${addr} . inet_proto . inet_service : verdict ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }`);
  lines.push(`add map T ${MAPS.serviceNodePorts} { type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }`);
  lines.push(`add map T ${MAPS.noEndpointServices} { type ${addr} . inet_proto . inet_service : verdict ; comment "Service addresses without endpoints: reject or drop" ; }`);
  lines.push(`add map T ${MAPS.noEndpointNodePorts} { type inet_proto . inet_service : verdict ; comment "NodePorts without endpoints: reject or drop" ; }`);
  lines.push(`add map T ${MAPS.firewallIps} { type ${addr} . inet_proto . inet_service : verdict ; comment "LoadBalancer IPs with loadBalancerSourceRanges" ; }`);
  lines.push(`add map T ${MAPS.connectionCounters} { type ${addr} . inet_proto . inet_service : counter ; comment "first packets of connections per Service address" ; }`);
  lines.push(`add map T ${MAPS.inCounters} { type ${addr} . inet_proto . inet_service : counter ; comment "client to Service packets per Service address" ; }`);
  lines.push(`add map T ${MAPS.outCounters} { type ${addr} . inet_proto . inet_service : counter ; comment "Service to client packets per Service address" ; }`);
  // Per direction of conntrack's tuple: before DNAT (priority -110) a client's packet still has the Service address
  // as destination, after srcnat (300) a reply has it as source again. (nft 1.0.6 cannot key a map on
  // `ct original proto-dst`, which would have done both in one place.) Every packet passes prerouting or output once,
  // and input or postrouting once. Counted after the firewall checks: what they drop is not Service traffic.
  const countIn = `ct direction original counter name ${ip} daddr . meta l4proto . th dport map @${MAPS.inCounters}`;
  const countOut = `ct direction reply counter name ${ip} saddr . meta l4proto . th sport map @${MAPS.outCounters}`;
  const rules: Record<string, string[]> = {
    [CHAINS.filterPrerouting]: [`ct state new jump ${CHAINS.firewallCheck}`, countIn],
    // reject is valid only in input, forward and output.
    [CHAINS.filterInput]: [`ct state new jump ${CHAINS.endpointsCheck}`],
    [CHAINS.filterForward]: [`ct state new jump ${CHAINS.endpointsCheck}`],
    [CHAINS.filterOutput]: [`ct state new jump ${CHAINS.endpointsCheck}`, `ct state new jump ${CHAINS.firewallCheck}`, countIn],
    [CHAINS.natPrerouting]: [`jump ${CHAINS.services}`],
    [CHAINS.natOutput]: [`jump ${CHAINS.services}`],
    [CHAINS.natPostrouting]: [`jump ${CHAINS.masquerading}`],
    [CHAINS.countersInput]: [countOut],
    [CHAINS.countersPostrouting]: [countOut],
    // A nat chain sees a connection's first packet only: kube-proxy's layout makes this the connection count.
    [CHAINS.services]: [
      `counter name ${ip} daddr . meta l4proto . th dport map @${MAPS.connectionCounters}`,
      `${ip} daddr . meta l4proto . th dport vmap @${MAPS.serviceIps}`,
      `${nodePortMatch} meta l4proto . th dport vmap @${MAPS.serviceNodePorts}`,
    ],
    [CHAINS.masquerading]: [`meta mark & ${MASQUERADE_MARK} == 0 return`, `meta mark set meta mark ^ ${MASQUERADE_MARK}`, 'masquerade fully-random'],
    [CHAINS.markForMasquerade]: [`meta mark set meta mark | ${MASQUERADE_MARK}`],
    [CHAINS.endpointsCheck]: [
      `${ip} daddr . meta l4proto . th dport vmap @${MAPS.noEndpointServices}`,
      `${nodePortMatch} meta l4proto . th dport vmap @${MAPS.noEndpointNodePorts}`,
    ],
    [CHAINS.firewallCheck]: [`${ip} daddr . meta l4proto . th dport vmap @${MAPS.firewallIps}`],
    // TCP gets a reset, the rest ICMP port unreachable: a client fails at once instead of timing out.
    [CHAINS.reject]: ['meta l4proto tcp reject with tcp reset', 'reject'],
  };
  const ruleCounts = new Map<string, number>();
  for (const [chain, chainRules] of Object.entries(rules)) {
    lines.push(`flush chain T ${chain}`);
    for (const rule of chainRules) lines.push(`add rule T ${chain} ${rule}`);
    ruleCounts.set(chain, chainRules.length);
  }
  return { lines, ruleCounts };
}

/** The chain names of one Service port. */
export function portChainNames(plan: ServicePortPlan) {
  const base = servicePortBase(plan.owner, plan.protocol, plan.portName);
  return {
    cluster: hashedName(PREFIX.cluster, base),
    local: hashedName(PREFIX.local, base),
    external: hashedName(PREFIX.external, base),
    firewall: hashedName(PREFIX.firewall, base),
  };
}

export function endpointChainName(plan: ServicePortPlan, endpoint: Pick<ServiceEndpoint, 'address' | 'port'>): string {
  return hashedName(PREFIX.endpoint, endpointBase(servicePortBase(plan.owner, plan.protocol, plan.portName), endpoint.address, endpoint.port));
}

/** The affinity set's name hashes its timeout too: a new timeout is a new set (the kernel cannot change one in place). */
export function affinitySetName(plan: ServicePortPlan, endpoint: Pick<ServiceEndpoint, 'address' | 'port'>, seconds: number): string {
  const base = endpointBase(servicePortBase(plan.owner, plan.protocol, plan.portName), endpoint.address, endpoint.port);
  return hashedName(PREFIX.affinity, `${base}@${seconds}s`).replace(`@${seconds}s`, '');
}

function endpointText(family: IpFamily, endpoint: Pick<ServiceEndpoint, 'address' | 'port'>): string {
  return family === 'ipv6' ? `[${endpoint.address}]:${endpoint.port}` : `${endpoint.address}:${endpoint.port}`;
}

/**
 * The whole table as it should be for these Service ports (by Service, or a flat list): kube-proxy's rules, per Service
 * port. With a cache, a Service whose plans are the same array as last time is not rendered again.
 */
export function renderTable(
  plans: ReadonlyMap<string, readonly ServicePortPlan[]> | readonly ServicePortPlan[],
  nodePortIps: readonly string[],
  options: RenderOptions,
  cache?: RenderCache,
): TableState {
  const base = renderBase(options);
  const groups = isGrouped(plans) ? plans : groupByOwner(plans);
  // NodePorts are counted per node address, as proxy-ipvs has a virtual server per node address (not with
  // nodePortBindOnAllIp: every local address answers then, and they are not known here).
  const counterNodeAddresses = options.nodePortBindOnAllIp ? [] : nodePortIps;
  const key = JSON.stringify([options, counterNodeAddresses]);
  const fragments = new Map<string, Fragment>();
  for (const [owner, group] of groups) {
    const cached = cache?.get(group);
    const fragment = cached && cached.key === key ? cached.fragment : renderService(group, options, counterNodeAddresses);
    cache?.set(group, { key, fragment });
    fragments.set(owner, fragment);
  }
  return tableState(base.lines, new Set(options.nodePortBindOnAllIp ? [] : nodePortIps), fragments, base.ruleCounts);
}

function isGrouped(plans: ReadonlyMap<string, readonly ServicePortPlan[]> | readonly ServicePortPlan[]): plans is ReadonlyMap<string, readonly ServicePortPlan[]> {
  return plans instanceof Map;
}

function groupByOwner(plans: readonly ServicePortPlan[]): Map<string, ServicePortPlan[]> {
  const groups = new Map<string, ServicePortPlan[]>();
  for (const plan of plans) {
    const group = groups.get(plan.owner) ?? [];
    group.push(plan);
    groups.set(plan.owner, group);
  }
  return groups;
}

/** A TableState whose merged views are computed when first read: an event sync reads only the fragments. */
function tableState(base: readonly string[], nodePortIps: ReadonlySet<string>, fragments: ReadonlyMap<string, Fragment>, baseRuleCounts: ReadonlyMap<string, number>): TableState {
  let merged: { chains: Map<string, readonly string[]>; maps: Record<MapName, Map<string, string>>; affinitySets: Map<string, number> } | undefined;
  const views = () => {
    if (!merged) {
      merged = { chains: new Map(), maps: Object.fromEntries(ALL_MAPS.map((name) => [name, new Map<string, string>()])) as Record<MapName, Map<string, string>>, affinitySets: new Map() };
      for (const fragment of fragments.values()) {
        for (const [chain, rules] of fragment.chains) merged.chains.set(chain, rules);
        for (const [map, elementKey, verdict] of fragment.elements) merged.maps[map].set(elementKey, verdict);
        for (const [set, seconds] of fragment.affinitySets) merged.affinitySets.set(set, seconds);
      }
    }
    return merged;
  };
  // Merged apart from the rest: a scrape reads only the counters, and should not pay for the chains and maps.
  let counters: Map<string, ServiceCounter> | undefined;
  return {
    base,
    nodePortIps,
    fragments,
    baseRuleCounts,
    get chains() {
      return views().chains;
    },
    get maps() {
      return views().maps;
    },
    get affinitySets() {
      return views().affinitySets;
    },
    get counters() {
      if (!counters) {
        counters = new Map();
        for (const fragment of fragments.values()) for (const [counter, counted] of fragment.counters) counters.set(counter, counted);
      }
      return counters;
    },
  };
}

/** The named counter of one Service address for one series; stable, so that a restart adopts it with its count. */
export function counterName(kind: CounterKind, plan: Pick<ServicePortPlan, 'owner' | 'protocol' | 'portName'>, address: string, port: number): string {
  return hashedName(COUNTER_PREFIX[kind], endpointBase(servicePortBase(plan.owner, plan.protocol, plan.portName), address, port));
}

const COUNTER_MAP_OF: Readonly<Record<CounterKind, MapName>> = { connections: MAPS.connectionCounters, in: MAPS.inCounters, out: MAPS.outCounters };

/** One Service's chains, map elements, affinity sets and counters. */
function renderService(plans: readonly ServicePortPlan[], options: RenderOptions, nodeAddresses: readonly string[]): Fragment {
  const ip = ipOf(options.family);
  const chains = new Map<string, string[]>();
  const elements: [MapName, string, string][] = [];
  const affinitySets = new Map<string, number>();
  const counters = new Map<string, ServiceCounter>();
  const counted = new Set<string>();
  const podCidrs = options.podCidrs.length > 0 ? `{ ${options.podCidrs.join(', ')} }` : undefined;
  const maps = {
    [MAPS.serviceIps]: { set: (key: string, verdict: string) => elements.push([MAPS.serviceIps, key, verdict]) },
    [MAPS.serviceNodePorts]: { set: (key: string, verdict: string) => elements.push([MAPS.serviceNodePorts, key, verdict]) },
    [MAPS.noEndpointServices]: { set: (key: string, verdict: string) => elements.push([MAPS.noEndpointServices, key, verdict]) },
    [MAPS.noEndpointNodePorts]: { set: (key: string, verdict: string) => elements.push([MAPS.noEndpointNodePorts, key, verdict]) },
    [MAPS.firewallIps]: { set: (key: string, verdict: string) => elements.push([MAPS.firewallIps, key, verdict]) },
  };
  for (const plan of plans) {
    const names = portChainNames(plan);
    const { cluster: clusterEndpoints, local: localEndpoints, allReachable, hasAnyEndpoints } = plan.endpoints;
    const key = (address: string, port = plan.port) => `${address} . ${plan.protocol} . ${port}`;
    const nodePortKey = `${plan.protocol} . ${plan.nodePort}`;
    const clusterPolicy = usesClusterEndpoints(plan);
    const localPolicy = usesLocalEndpoints(plan);
    const usesClusterChain = clusterEndpoints.length > 0 && clusterPolicy;
    const usesLocalChain = localEndpoints.length > 0 && localPolicy;
    const internalChain = plan.internalLocal ? names.local : names.cluster;
    const hasInternal = hasAnyEndpoints && (!plan.internalLocal || localEndpoints.length > 0);
    const externalPolicyChain = plan.externalLocal ? names.local : names.cluster;
    const hasExternal = hasAnyEndpoints && (!plan.externalLocal || localEndpoints.length > 0);
    const usesExternalChain = hasAnyEndpoints && plan.externallyAccessible;
    const internalVerdict = hasAnyEndpoints ? 'drop' : `goto ${CHAINS.reject}`;
    const externalVerdict = internalVerdict;

    // Three counters per address that reaches this port (what proxy-ipvs calls a virtual server).
    const countedAddresses: [string, number][] = [[plan.clusterIp, plan.port], ...[...plan.externalIps, ...plan.loadBalancerIps].map((address): [string, number] => [address, plan.port])];
    if (plan.nodePort !== 0) countedAddresses.push(...nodeAddresses.map((address): [string, number] => [address, plan.nodePort]));
    for (const [address, port] of countedAddresses) {
      const elementKey = key(address, port);
      if (counted.has(elementKey)) continue;
      counted.add(elementKey);
      for (const kind of Object.keys(COUNTER_PREFIX) as CounterKind[]) {
        const name = counterName(kind, plan, address, port);
        counters.set(name, { kind, owner: plan.owner, address, protocol: plan.protocol, port });
        elements.push([COUNTER_MAP_OF[kind], elementKey, name]);
      }
    }

    if (hasInternal) maps[MAPS.serviceIps].set(key(plan.clusterIp), `goto ${internalChain}`);
    else maps[MAPS.noEndpointServices].set(key(plan.clusterIp), internalVerdict);
    for (const address of plan.externalIps) {
      if (hasAnyEndpoints) maps[MAPS.serviceIps].set(key(address), `goto ${names.external}`);
      if (!hasExternal) maps[MAPS.noEndpointServices].set(key(address), externalVerdict);
    }
    const usesFirewall = plan.loadBalancerIps.length > 0 && plan.firewalled;
    if (usesFirewall) {
      const sources = [...plan.sourceRanges, ...(plan.allowLoadBalancerIpsAsSources ? plan.loadBalancerIps : [])];
      // A family without ranges of its own admits no source (stricter than kube-proxy, as proxy-ipvs; see the docs).
      chains.set(names.firewall, [sources.length > 0 ? `${ip} saddr != { ${sources.join(', ')} } drop` : 'drop']);
    }
    for (const address of plan.loadBalancerIps) {
      if (hasAnyEndpoints) maps[MAPS.serviceIps].set(key(address), `goto ${names.external}`);
      if (usesFirewall) maps[MAPS.firewallIps].set(key(address), `goto ${names.firewall}`);
      if (!hasExternal) maps[MAPS.noEndpointServices].set(key(address), externalVerdict);
    }
    if (plan.nodePort !== 0) {
      if (hasAnyEndpoints) maps[MAPS.serviceNodePorts].set(nodePortKey, `goto ${names.external}`);
      if (!hasExternal) maps[MAPS.noEndpointNodePorts].set(nodePortKey, externalVerdict);
    }

    const affinity = plan.affinitySeconds;
    const toEndpoints = (endpoints: readonly ServiceEndpoint[]): string[] => {
      const rules: string[] = [];
      if (affinity !== undefined) {
        for (const endpoint of endpoints) rules.push(`${ip} saddr @${affinitySetName(plan, endpoint, affinity)} goto ${endpointChainName(plan, endpoint)}`);
      }
      const choices = endpoints.map((endpoint, index) => `${index} : goto ${endpointChainName(plan, endpoint)}`);
      rules.push(`numgen random mod ${endpoints.length} vmap { ${choices.join(', ')} }`);
      return rules;
    };
    // Traffic to the ClusterIP from outside the pod CIDRs is masqueraded: it may come back through another node.
    const masqueradeInternal = options.masqueradeAll
      ? [`${ip} daddr ${plan.clusterIp} ${plan.protocol} dport ${plan.port} jump ${CHAINS.markForMasquerade}`]
      : podCidrs
        ? [`${ip} daddr ${plan.clusterIp} ${plan.protocol} dport ${plan.port} ${ip} saddr != ${podCidrs} jump ${CHAINS.markForMasquerade}`]
        : [];
    if (usesClusterChain) chains.set(names.cluster, [...(internalChain === names.cluster && hasInternal ? masqueradeInternal : []), ...toEndpoints(clusterEndpoints)]);
    if (usesLocalChain) chains.set(names.local, [...(internalChain === names.local && hasInternal ? masqueradeInternal : []), ...toEndpoints(localEndpoints)]);

    if (usesExternalChain) {
      const rules: string[] = [];
      if (!plan.externalLocal) {
        rules.push(`jump ${CHAINS.markForMasquerade}`);
      } else {
        // Pods reaching an external address are not external clients: they get the Cluster policy, as if they had gone
        // out to the load balancer and come back. So does the node itself, masqueraded (its source is a local address).
        if (podCidrs && usesClusterChain) rules.push(`${ip} saddr ${podCidrs} goto ${names.cluster}`);
        rules.push(`fib saddr type local jump ${CHAINS.markForMasquerade}`);
        if (usesClusterChain) rules.push(`fib saddr type local goto ${names.cluster}`);
      }
      if (hasExternal) rules.push(`goto ${externalPolicyChain}`);
      chains.set(names.external, rules);
    }

    for (const endpoint of allReachable) {
      const rules = [`${ip} saddr ${endpoint.address} jump ${CHAINS.markForMasquerade}`];
      if (affinity !== undefined) {
        const set = affinitySetName(plan, endpoint, affinity);
        affinitySets.set(set, affinity);
        rules.push(`update @${set} { ${ip} saddr }`);
      }
      rules.push(`meta l4proto ${plan.protocol} dnat to ${endpointText(options.family, endpoint)}`);
      chains.set(endpointChainName(plan, endpoint), rules);
    }
  }
  return { chains, elements, affinitySets, counters };
}
