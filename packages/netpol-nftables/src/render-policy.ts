import type { CompiledPolicy, CompiledRule, Direction, IpFamily, PortRange } from '@kube-router/netpol';
import { ipBlockElements } from './interval.js';
import { POLICY_MARK, ipBlockSetName, namedPortsSetName, peerPodsSetName } from './names.js';
import { DEFAULT_CHAIN, policyChainName, ruleSetKey } from '@kube-router/netpol';
import type { NetpolPolicyRender, PolicyFamilyObjects } from '@kube-router/netpol';
import { chain } from './objects.js';
import type { ChainRender, NftRuleText, SetRender } from './objects.js';

/** What one policy puts into one family's table: one transaction's worth. */
export type PolicyFamilyRender = PolicyFamilyObjects<ChainRender, SetRender>;
export type PolicyRender = NetpolPolicyRender<ChainRender, SetRender>;

const DIRECTIONS: readonly Direction[] = ['ingress', 'egress'];
const ADDRESS: Record<IpFamily, { keyword: string; type: string }> = {
  ipv4: { keyword: 'ip', type: 'ipv4_addr' },
  ipv6: { keyword: 'ip6', type: 'ipv6_addr' },
};
const ANY_PROTOCOL = '0-255';
const ALLOW = `meta mark set meta mark | 0x${POLICY_MARK.toString(16)} return`;

/**
 * A policy's chains (one per isolating direction) and sets, per family. The pod chain that jumps here is entered
 * only for its own pod's traffic in that direction, so a rule matches the remote side and the ports alone: no set of
 * targets. A direction that failed to compile gets no chain: the pod chains of its targets reject instead.
 */
export function renderPolicy(policy: CompiledPolicy, families: readonly IpFamily[]): PolicyRender {
  return { id: policy.id, families: new FamilyRenders(policy, families) };
}

/**
 * Each family is rendered when it is first asked for: the applier builds and sends the IPv4 table's transaction
 * before it asks for the IPv6 objects, so a full sync's IPv6 rendering runs while nft writes the IPv4 table. Getters
 * on a class, not properties defined on each object: a thousand of those made a first sync's objects slow to read.
 */
class FamilyRenders implements Partial<Record<IpFamily, PolicyFamilyRender>> {
  readonly #policy: CompiledPolicy;
  readonly #families: readonly IpFamily[];
  #ipv4: PolicyFamilyRender | undefined;
  #ipv6: PolicyFamilyRender | undefined;

  constructor(policy: CompiledPolicy, families: readonly IpFamily[]) {
    this.#policy = policy;
    this.#families = families;
  }

  /** Undefined when the family is not enabled or the policy has no target with an address of it. */
  get ipv4(): PolicyFamilyRender | undefined {
    return this.#has('ipv4') ? (this.#ipv4 ??= renderFamily(this.#policy, 'ipv4')) : undefined;
  }

  get ipv6(): PolicyFamilyRender | undefined {
    return this.#has('ipv6') ? (this.#ipv6 ??= renderFamily(this.#policy, 'ipv6')) : undefined;
  }

  #has(family: IpFamily): boolean {
    return this.#families.includes(family) && this.#policy.targetIPs[family].length > 0;
  }
}

function renderFamily(policy: CompiledPolicy, family: IpFamily): PolicyFamilyRender {
  const chains: ChainRender[] = [];
  const sets: SetRender[] = [];
  for (const direction of DIRECTIONS) {
    const compiled = policy[direction];
    if (!compiled.isolates || compiled.failClosed) continue;
    const what = direction === 'ingress' ? 'from source pods to dest pods' : 'from pods to destinations';
    const comment = `rule to ACCEPT traffic ${what} selected by policy name: ${policy.name} namespace ${policy.namespace}`;
    const rules: NftRuleText[] = [];
    for (const rule of compiled.rules) renderRule(policy, direction, rule, family, comment, rules, sets);
    chains.push(chain(policyChainName(policy.id, direction, family), rules));
  }
  // Rules with the same selectors or the same ipBlocks (port 80 and port 443 from the same pods) share a set: listed
  // once, so that a transaction never carries its element changes twice.
  if (sets.length < 2) return { chains, sets };
  const named = new Map(sets.map((set) => [set.name, set] as const));
  return { chains, sets: named.size === sets.length ? sets : [...named.values()] };
}

/** Appends the rule's statements to `rules` and the sets they name to `sets`. */
function renderRule(
  policy: CompiledPolicy,
  direction: Direction,
  rule: CompiledRule,
  family: IpFamily,
  comment: string,
  rules: NftRuleText[],
  sets: SetRender[],
): void {
  const { keyword, type } = ADDRESS[family];
  const remote = direction === 'ingress' ? 'saddr' : 'daddr';

  const peers: string[] = [];
  if (rule.peers.any) {
    peers.push('');
  } else {
    const pods = rule.peers.pods[family];
    if (pods.length > 0) {
      const name = peerPodsSetName(direction, rule.peers.podsKey, family);
      sets.push({ name, type, kind: 'hash', elements: pods });
      peers.push(`${keyword} ${remote} @${name}`);
    }
    const blocks = rule.peers.ipBlocks[family];
    if (blocks.length > 0) {
      // Address . protocol, every protocol (0-255): only the address narrows it, but before any element command nft
      // 1.0.6 reads the elements of every interval set of the namespace that is not a concatenation, one netlink
      // dump a set (60-120 µs each), so a plain interval set per distinct ipBlock would slow every pod event on the
      // node. A concatenation it leaves alone.
      const elements = ipBlockElements(blocks, family).map((range) => `${range} . ${ANY_PROTOCOL}`);
      const name = ipBlockSetName(direction, elements, family);
      sets.push({ name, type: `${type} . inet_proto`, kind: 'interval', elements });
      peers.push(`${keyword} ${remote} . meta l4proto @${name}`);
    }
  }
  if (peers.length === 0) return;

  // One port, one protocol or one named-port destination is matched as it is: an anonymous set of one element is
  // still a set in the kernel, and every set in the table adds to what each `nft -f` reads before it writes.
  const ports: string[] = [];
  if (rule.allPorts) ports.push('');
  const numbered: PortRange[] = [];
  const wholeProtocols = new Set<string>();
  for (const port of rule.ports) {
    if (port.port === undefined) wholeProtocols.add(port.protocol.toLowerCase());
    else addMerged(numbered, port);
  }
  if (numbered.length === 1) ports.push(portMatch(numbered[0] as PortRange));
  else if (numbered.length > 1) ports.push(`meta l4proto . th dport { ${numbered.map(portElement).join(', ')} }`);
  if (wholeProtocols.size === 1) ports.push(`meta l4proto ${[...wholeProtocols][0] as string}`);
  else if (wholeProtocols.size > 1) ports.push(`meta l4proto { ${[...wholeProtocols].join(', ')} }`);
  const single = singleNamedDestination(rule, family);
  if (single) {
    ports.push(`${keyword} daddr ${single.ip} meta l4proto ${single.protocol} th dport ${single.port}`);
  } else if (single === undefined) {
    // Every named port of the rule in one set of destination . protocol . port: one lookup, one rule.
    const named = [...new Set(rule.namedPorts.flatMap((entry) =>
      entry.destinations[family].map((ip) => `${ip} . ${entry.protocol.toLowerCase()} . ${entry.port}`),
    ))].sort();
    const name = namedPortsSetName(policy.id, direction, ruleSetKey(rule), family);
    sets.push({ name, type: `${type} . inet_proto . inet_service`, kind: 'hash', elements: named });
    ports.push(`${keyword} daddr . meta l4proto . th dport @${name}`);
  }

  for (const peer of peers) {
    for (const port of ports) {
      const match = peer === '' ? port : port === '' ? peer : `${peer} ${port}`;
      // `counter`: what the policy allowed, for kube_router_netpol_policy_packets_total (read at scrape time).
      rules.push({ text: match === '' ? `counter goto ${DEFAULT_CHAIN}` : `${match} counter ${ALLOW}`, comment });
    }
  }
}

/**
 * The rule's one named-port destination, if it has exactly one; null when it has none, undefined when several (a
 * set of them). Most rules name one port that one target defines: this spares them building the set's elements.
 */
function singleNamedDestination(rule: CompiledRule, family: IpFamily): { ip: string; protocol: string; port: number } | null | undefined {
  let found: { ip: string; protocol: string; port: number } | null = null;
  for (const entry of rule.namedPorts) {
    for (const ip of entry.destinations[family]) {
      const protocol = entry.protocol.toLowerCase();
      if (found && (found.ip !== ip || found.protocol !== protocol || found.port !== entry.port)) return undefined;
      found = { ip, protocol, port: entry.port };
    }
  }
  return found;
}

/**
 * Adds a numbered port to ports of the model's order (by protocol, then first port), merged into the last one when the
 * two overlap: the kernel refuses an element of a concatenated interval set (`tcp . 8000-9000, tcp . 8080`) that
 * overlaps another. Ranges that do not overlap stay as they are, and so does the rule's text.
 */
function addMerged(numbered: PortRange[], port: PortRange): void {
  const last = numbered.at(-1);
  if (last === undefined || last.protocol !== port.protocol || (port.port ?? 0) > lastPort(last)) numbered.push(port);
  else if (lastPort(port) > lastPort(last)) numbered[numbered.length - 1] = { ...last, endPort: lastPort(port) };
}

/** The last port a numbered port range covers. */
function lastPort(range: PortRange): number {
  return range.endPort ?? range.port ?? 0;
}

function portMatch(port: PortRange): string {
  const range = port.endPort !== undefined && port.endPort !== port.port ? `${port.port}-${port.endPort}` : `${port.port}`;
  return `meta l4proto ${port.protocol.toLowerCase()} th dport ${range}`;
}

function portElement(port: PortRange): string {
  const range = port.endPort !== undefined && port.endPort !== port.port ? `${port.port}-${port.endPort}` : `${port.port}`;
  return `${port.protocol.toLowerCase()} . ${range}`;
}
