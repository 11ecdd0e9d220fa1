import type { ClusterView } from './cluster-index.js';
import { fingerprintOf } from './fingerprint.js';
import type {
  CompiledDirection,
  CompiledPolicy,
  CompiledRule,
  Direction,
  NamedPortMatch,
  PerFamily,
  PolicyProblem,
  PolicyTarget,
  PortRange,
} from './model.js';
import type { NamedPortRef, ParsedDirection, ParsedPolicy, ParsedRule, SelectorPeer } from './parse-policy.js';
import { namedPortKey } from './pods.js';
import type { PodView } from './pods.js';
import { compareText, sortedUnique } from './sort.js';

/** What a selector peer selects: shared by every policy of one compile that uses the same peer. */
interface PeerSelection {
  readonly pods: readonly PodView[];
  readonly ips: PerFamily<readonly string[]>;
}

export type PeerCache = Map<string, PeerSelection>;

export interface ResolvedPolicy {
  /** Undefined when the policy selects no local pod. */
  readonly compiled: CompiledPolicy | undefined;
  /** Problems found while resolving (named ports that match nothing). */
  readonly problems: readonly PolicyProblem[];
}

/** Resolves a parsed policy against the cluster: its local targets, and its peers and named ports as addresses. */
export function resolvePolicy(parsed: ParsedPolicy, cluster: ClusterView, cache: PeerCache): ResolvedPolicy {
  if (!parsed.identified) return { compiled: undefined, problems: [] };
  const targets: PodView[] = [];
  for (const pod of cluster.localPodsIn(parsed.namespace)) {
    if (!parsed.targetSelector || parsed.targetSelector.matches(pod.labels)) targets.push(pod);
  }
  if (targets.length === 0) return { compiled: undefined, problems: [] };
  targets.sort((a, b) => compareText(a.id, b.id));

  const problems: PolicyProblem[] = [];
  const ingress = resolveDirection('ingress', parsed, targets, cluster, cache, problems);
  const egress = resolveDirection('egress', parsed, targets, cluster, cache, problems);
  const policyTargets: PolicyTarget[] = targets.map((pod) => ({ pod: pod.id, ips: pod.ips }));
  return { compiled: new FingerprintedPolicy(parsed, policyTargets, ipsOf(targets), ingress, egress), problems };
}

/**
 * A compiled policy whose fingerprint, of its own fields in their order, is worked out when first read (most never
 * are: see defineFingerprint). A getter on a class rather than a property defined on each object: an object with a
 * defined property goes into dictionary mode, slow to read for every renderer after (the IPv4 render of a thousand
 * policies took a quarter less time without it), and its two closures per policy were garbage to copy.
 */
class FingerprintedPolicy implements CompiledPolicy {
  readonly id: string;
  readonly namespace: string;
  readonly name: string;
  readonly targets: readonly PolicyTarget[];
  readonly targetIPs: PerFamily<readonly string[]>;
  readonly ingress: CompiledDirection;
  readonly egress: CompiledDirection;
  #fingerprint: string | undefined;

  constructor(
    parsed: ParsedPolicy,
    targets: readonly PolicyTarget[],
    targetIPs: PerFamily<readonly string[]>,
    ingress: CompiledDirection,
    egress: CompiledDirection,
  ) {
    this.id = parsed.id;
    this.namespace = parsed.namespace;
    this.name = parsed.name;
    this.targets = targets;
    this.targetIPs = targetIPs;
    this.ingress = ingress;
    this.egress = egress;
  }

  /** JSON of the own fields above: neither this getter (on the prototype) nor the private field is one of them. */
  get fingerprint(): string {
    return (this.#fingerprint ??= fingerprintOf(this));
  }
}

function resolveDirection(
  direction: Direction,
  parsed: ParsedPolicy,
  targets: readonly PodView[],
  cluster: ClusterView,
  cache: PeerCache,
  problems: PolicyProblem[],
): CompiledDirection {
  const spec: ParsedDirection = parsed[direction];
  if (!spec.isolates || spec.failed) return { isolates: spec.isolates, failClosed: spec.failed, rules: [] };
  const rules = spec.rules.map((rule) => resolveRule(direction, parsed, rule, targets, cluster, cache, problems));
  return { isolates: true, failClosed: false, rules };
}

function resolveRule(
  direction: Direction,
  parsed: ParsedPolicy,
  rule: ParsedRule,
  targets: readonly PodView[],
  cluster: ClusterView,
  cache: PeerCache,
  problems: PolicyProblem[],
): CompiledRule {
  const podsKey = rule.anyPeer ? '' : selectionKey(rule.selectorPeers);
  // Every rule with the same selector peers shares one selection and its sorted IP lists, several peers included.
  const selection = rule.selectorPeers.length === 1 ? selectPeers(rule.selectorPeers[0] as SelectorPeer, cluster, cache) : unionOfPeers(rule, podsKey, cluster, cache);
  const peers = {
    any: rule.anyPeer,
    podsKey,
    pods: rule.anyPeer ? { ipv4: [], ipv6: [] } : selection.ips,
    ipBlocks: rule.anyPeer ? { ipv4: [], ipv6: [] } : rule.ipBlocks,
  };
  // Only egress looks a named port up on the peers (ingress, on the targets).
  const peerPods = new Map<string, PodView>();
  if (direction === 'egress' && rule.namedPorts.length > 0) for (const pod of selection.pods) peerPods.set(pod.id, pod);

  const namedPorts: NamedPortMatch[] = [];
  const seen = new Set<string>();
  for (const ref of rule.namedPorts) {
    const key = namedPortKey(ref.name, ref.protocol);
    if (seen.has(key)) continue;
    seen.add(key);
    const byNumber = namedPortDestinations(direction, rule, key, targets, peerPods, cluster);
    if (byNumber.size === 0) {
      problems.push({
        policy: parsed.id,
        severity: 'warning',
        direction,
        path: ref.path,
        message: `named port ${ref.name}/${ref.protocol} matches no container port of the ${
          direction === 'ingress' ? 'selected local pods' : 'peer pods'
        }, so it allows nothing`,
      });
    }
    for (const [port, destinations] of byNumber) namedPorts.push(namedPortMatch(ref, port, destinations));
  }
  namedPorts.sort((a, b) => compareText(a.name, b.name) || compareText(a.protocol, b.protocol) || a.port - b.port);

  return { index: rule.index, peers, allPorts: rule.allPorts, ports: sortPorts(rule.ports), namedPorts };
}

/** The rule's selector peers' keys, each once, sorted: what its peer pods are named and cached by. */
function selectionKey(peers: readonly SelectorPeer[]): string {
  if (peers.length === 1) return (peers[0] as SelectorPeer).key;
  return [...new Set(peers.map((peer) => peer.key))].sort(compareText).join('\n');
}

function namedPortMatch(ref: NamedPortRef, port: number, destinations: PerFamily<readonly string[]>): NamedPortMatch {
  return { name: ref.name, protocol: ref.protocol, port, destinations };
}

/**
 * Where a named port leads, by port number. Ingress: the local targets that define it. Egress: the peers that define
 * it, each numbering the name its own way: the selector peers with all their addresses, and for ipBlocks the pods
 * with addresses inside them (only those addresses). Only pods defining the port are looked at, and a rule open to
 * any peer shares the cluster-wide answer, so a policy costs what it selects rather than the size of the cluster.
 */
function namedPortDestinations(
  direction: Direction,
  rule: ParsedRule,
  key: string,
  targets: readonly PodView[],
  peerPods: ReadonlyMap<string, PodView>,
  cluster: ClusterView,
): ReadonlyMap<number, PerFamily<readonly string[]>> {
  if (direction === 'egress' && rule.anyPeer) return cluster.namedPortDestinations(key);
  const byNumber = new Map<number, { ipv4: string[]; ipv6: string[] }>();
  const add = (pod: PodView, ips: PerFamily<readonly string[]>) => {
    const port = pod.namedPorts.get(key);
    if (port === undefined) return;
    let destinations = byNumber.get(port);
    if (!destinations) {
      destinations = { ipv4: [], ipv6: [] };
      byNumber.set(port, destinations);
    }
    destinations.ipv4.push(...ips.ipv4);
    destinations.ipv6.push(...ips.ipv6);
  };
  if (direction === 'ingress') {
    for (const pod of targets) add(pod, pod.ips);
  } else {
    for (const pod of peerPods.values()) add(pod, pod.ips);
    if (rule.blocks.length > 0) {
      for (const pod of cluster.podsWithNamedPort(key)) {
        if (peerPods.has(pod.id)) continue;
        const inside = ipsInside(pod, rule);
        if (inside.ipv4.length > 0 || inside.ipv6.length > 0) add(pod, inside);
      }
    }
  }
  const result = new Map<number, PerFamily<readonly string[]>>();
  for (const [port, destinations] of byNumber) {
    result.set(port, { ipv4: sortedUnique(destinations.ipv4), ipv6: sortedUnique(destinations.ipv6) });
  }
  return result;
}

/** The pod's addresses that lie inside the rule's ipBlocks. */
export function ipsInside(pod: PodView, rule: Pick<ParsedRule, 'blockRanges'>): PerFamily<string[]> {
  const inside = { ipv4: [] as string[], ipv6: [] as string[] };
  for (const ip of pod.parsedIps) if (rule.blockRanges.contains(ip)) inside[ip.family].push(ip.text);
  return inside;
}

/**
 * The pods of several selector peers, each once. Cached under the rule's podsKey behind a NUL, which no peer's own
 * key starts with (each begins with `namespace`): a peer key holds its namespace as it is, so without it a malformed
 * namespace could spell another rule's podsKey.
 */
function unionOfPeers(rule: ParsedRule, podsKey: string, cluster: ClusterView, cache: PeerCache): PeerSelection {
  const key = `\0${podsKey}`;
  const cached = cache.get(key);
  if (cached) return cached;
  const pods = new Map<string, PodView>();
  for (const peer of rule.selectorPeers) for (const pod of selectPeers(peer, cluster, cache).pods) pods.set(pod.id, pod);
  const selection = { pods: [...pods.values()], ips: ipsOf(pods.values()) };
  cache.set(key, selection);
  return selection;
}

function selectPeers(peer: SelectorPeer, cluster: ClusterView, cache: PeerCache): PeerSelection {
  const cached = cache.get(peer.key);
  if (cached) return cached;
  const selected: PodView[] = [];
  const matchesPod = (pod: PodView) => !peer.podSelector || peer.podSelector.matches(pod.labels);
  if (peer.namespaceSelector) {
    for (const [namespace, labels] of cluster.namespaces()) {
      if (!peer.namespaceSelector.matches(labels)) continue;
      for (const pod of cluster.podsIn(namespace)) if (matchesPod(pod)) selected.push(pod);
    }
  } else {
    for (const pod of cluster.podsIn(peer.namespace)) if (matchesPod(pod)) selected.push(pod);
  }
  const selection = { pods: selected, ips: ipsOf(selected) };
  cache.set(peer.key, selection);
  return selection;
}

function ipsOf(pods: Iterable<PodView>): PerFamily<readonly string[]> {
  const ipv4: string[] = [];
  const ipv6: string[] = [];
  for (const pod of pods) {
    ipv4.push(...pod.ips.ipv4);
    ipv6.push(...pod.ips.ipv6);
  }
  return { ipv4: sortedUnique(ipv4), ipv6: sortedUnique(ipv6) };
}

const PROTOCOL_ORDER = { TCP: 0, UDP: 1, SCTP: 2 } as const;

function sortPorts(ports: readonly PortRange[]): PortRange[] {
  const unique = new Map<string, PortRange>();
  for (const port of ports) unique.set(`${port.protocol} ${port.port ?? ''} ${port.endPort ?? ''}`, port);
  return [...unique.values()].sort(
    (a, b) =>
      PROTOCOL_ORDER[a.protocol] - PROTOCOL_ORDER[b.protocol] ||
      (a.port ?? 0) - (b.port ?? 0) ||
      (a.endPort ?? a.port ?? 0) - (b.endPort ?? b.port ?? 0),
  );
}
