import type { Direction, IpFamily, LocalPod, NodeRenderInput, PolicyModel } from '@kube-router/netpol';
import { ACCEPT_MARK, EGRESS_MAP, INGRESS_MAP, LOCAL_PODS_SET, POLICY_MARK, TOP_CHAINS, sharedAddressChainName } from './names.js';
import { COMMON_CHAIN, DEFAULT_CHAIN, NFLOG_GROUP, TAIL_CHAIN, cidrFamily, podChainName, podChainPlan, podInComments, policyChainName, renderedOnRead } from '@kube-router/netpol';
import { chain } from './objects.js';
import type { ChainRender, NftRuleText, SetRender } from './objects.js';

export interface NodeRenderOptions {
  /**
   * --netpol-default-deny as kube-router means it: addresses of this node's pod CIDRs that are not the address of a
   * local pod whose rules are programmed are rejected. Pods that no policy selects stay open.
   */
  readonly defaultDeny: boolean;
  /** This node's pod CIDRs (either family): what default deny guards. */
  readonly podCidrs: readonly string[];
  /** A stronger mode of its own: pods that no policy selects are isolated both ways. */
  readonly isolateUnselectedPods: boolean;
  readonly serviceClusterIpRanges: readonly string[];
  readonly serviceExternalIpRanges: readonly string[];
  readonly serviceLoadBalancerIpRanges: readonly string[];
  /** `30000-32767`. */
  readonly nodePortRange: string;
}

/** Everything of one family's table that does not belong to one policy; written in one transaction. */
export interface NodeRender {
  /** Common, default and tail chains: what pod chains and the base chains refer to. */
  readonly sharedChains: readonly ChainRender[];
  readonly podChains: readonly ChainRender[];
  /** The two dispatch maps and the local pods set. */
  readonly sets: readonly SetRender[];
  readonly baseChains: readonly ChainRender[];
}

const ADDRESS: Record<IpFamily, { keyword: string; type: string }> = {
  ipv4: { keyword: 'ip', type: 'ipv4_addr' },
  ipv6: { keyword: 'ip6', type: 'ipv6_addr' },
};
const hex = (value: number) => `0x${value.toString(16)}`;
const CLEAR_POLICY_MARK = `meta mark set meta mark & ${hex(~POLICY_MARK >>> 0)}`;

/**
 * Pod chains rendered in the last two syncs, by what their rules depend on. An event re-renders the node with
 * every local pod, and hashing each pod chain's rules again made the event's cost grow with the number of policies.
 */
export class PodChainCache {
  #current = new Map<string, ChainRender>();
  #previous = new Map<string, ChainRender>();

  /** Forgets what the sync before the last one rendered and nothing since used; call once per sync. */
  nextSync(): void {
    this.#previous = this.#current;
    this.#current = new Map();
  }

  get(key: string, render: () => ChainRender | undefined): ChainRender | undefined {
    let found = this.#current.get(key) ?? this.#previous.get(key);
    if (found === undefined) {
      found = render();
      if (found === undefined) return undefined;
    }
    this.#current.set(key, found);
    return found;
  }
}

/**
 * The node's part of a family's table. `failedPolicies` are policies whose transaction the kernel refused: their
 * targets fail closed like the targets of a policy that did not compile.
 */
export function renderNode(
  model: PolicyModel,
  family: IpFamily,
  options: NodeRenderOptions,
  failedPolicies: ReadonlySet<string> = new Set(),
  podChainCache?: PodChainCache,
): NodeRender {
  const { keyword, type } = ADDRESS[family];
  const podChains: ChainRender[] = [];
  const ingress: string[] = [];
  const egress: string[] = [];
  const localPods: string[] = [];
  /** Per direction, each address with the pod chains of the local pods that hold it, in the model's order. */
  const dispatched = { ingress: new Map<string, string[]>(), egress: new Map<string, string[]>() };
  for (const pod of model.pods) {
    const ips = pod.ips[family];
    // A pod without an address of this family has nothing to dispatch here, and its policies render no chain here
    // (they have no target address of it): a pod chain would jump to chains that do not exist.
    if (ips.length === 0) continue;
    localPods.push(...ips);
    for (const direction of ['egress', 'ingress'] as const) {
      const build = () => {
        const rules = renderPodChain(pod, direction, family, options, failedPolicies);
        return rules && chain(podChainName(pod.id, direction, family), rules);
      };
      const podChain = podChainCache ? podChainCache.get(podChainKey(pod, direction, family, options, failedPolicies), build) : build();
      if (!podChain) continue;
      podChains.push(podChain);
      for (const ip of ips) {
        const chains = dispatched[direction].get(ip);
        if (chains) chains.push(podChain.name);
        else dispatched[direction].set(ip, [podChain.name]);
      }
    }
  }
  for (const direction of ['egress', 'ingress'] as const) {
    const entries = direction === 'ingress' ? ingress : egress;
    for (const [ip, chains] of dispatched[direction]) {
      if (chains.length === 1) {
        entries.push(`${ip} : jump ${chains[0] as string}`);
        continue;
      }
      // Several local pods hold the address: a map holds one verdict per key (two would make the kernel refuse the
      // whole dispatch), so it jumps to a chain that runs each pod's chain in turn. Listed after the pod chains it
      // jumps to.
      const shared = chain(
        sharedAddressChainName(ip, direction, family),
        chains.map((name) => ({ text: `jump ${name}`, comment: 'local pods holding the same address: traffic passes the policies of each' })),
      );
      podChains.push(shared);
      entries.push(`${ip} : jump ${shared.name}`);
    }
  }

  const accept: NftRuleText = {
    text: `meta mark & ${hex(ACCEPT_MARK)} == ${hex(ACCEPT_MARK)} accept`,
    comment: 'rule to explicitly ACCEPT traffic that comply to network policies',
  };
  const tail: NftRuleText[] = [];
  if (options.defaultDeny) {
    const cidrs = options.podCidrs.filter((cidr) => cidrFamily(cidr) === family);
    // Before the accept: a pod whose rules are not programmed must not get in through a programmed peer's pass.
    // The node's own addresses (a bridge gateway inside the pod CIDR) are not pods.
    for (const cidr of cidrs) {
      tail.push(
        {
          text: `${keyword} saddr ${cidr} ${keyword} saddr != @${LOCAL_PODS_SET} fib saddr type != local counter reject`,
          comment: 'reject unprogrammed local pod (default-deny)',
        },
        {
          text: `${keyword} daddr ${cidr} ${keyword} daddr != @${LOCAL_PODS_SET} fib daddr type != local counter reject`,
          comment: 'reject unprogrammed local pod (default-deny)',
        },
      );
    }
  }
  tail.push(accept);

  const exempt: NftRuleText[] = [];
  const ranges = [...options.serviceClusterIpRanges, ...options.serviceExternalIpRanges, ...options.serviceLoadBalancerIpRanges]
    .filter((cidr) => cidrFamily(cidr) === family);
  if (ranges.length > 0) {
    exempt.push({ text: `${keyword} daddr { ${ranges.join(', ')} } return`, comment: 'allow traffic to service cluster, external and LoadBalancer IP ranges' });
  }
  exempt.push({
    text: `meta l4proto { tcp, udp, sctp } fib daddr type local th dport ${options.nodePortRange.replace(':', '-')} return`,
    comment: 'allow LOCAL TCP, UDP and SCTP traffic to node ports',
  });
  const fromPods: NftRuleText = { text: `${keyword} saddr vmap @${EGRESS_MAP}`, comment: 'traffic from local pods to their egress chains' };
  const toPods: NftRuleText = { text: `${keyword} daddr vmap @${INGRESS_MAP}`, comment: 'traffic to local pods to their ingress chains' };
  const toTail: NftRuleText = { text: `jump ${TAIL_CHAIN}`, comment: 'netpol accept/reject' };

  return {
    sharedChains: [
      chain(COMMON_CHAIN, commonRules(family)),
      chain(DEFAULT_CHAIN, [{ text: `meta mark set meta mark | ${hex(POLICY_MARK)}`, comment: 'rule to mark traffic matching a network policy' }]),
      chain(TAIL_CHAIN, tail),
    ],
    podChains,
    sets: [
      { name: INGRESS_MAP, type, kind: 'hash', map: 'verdict', elements: ingress.sort() },
      { name: EGRESS_MAP, type, kind: 'hash', map: 'verdict', elements: egress.sort() },
      { name: LOCAL_PODS_SET, type, kind: 'hash', elements: options.defaultDeny ? [...new Set(localPods)].sort() : [] },
    ],
    baseChains: [
      // From a pod: routed elsewhere (forward) or to the node itself (input). To a pod: routed (forward) or sent by
      // the node (output).
      chain(TOP_CHAINS.input, [...exempt, fromPods, toTail], 'input'),
      chain(TOP_CHAINS.forward, [fromPods, toPods, toTail], 'forward'),
      chain(TOP_CHAINS.output, [toPods, toTail], 'output'),
    ],
  };
}

/** Everything renderPodChain reads, as one string. */
function podChainKey(pod: LocalPod, direction: Direction, family: IpFamily, options: NodeRenderOptions, failedPolicies: ReadonlySet<string>): string {
  const state = pod[direction];
  const failed = state.policies.some((id) => failedPolicies.has(id));
  return [pod.id, pod.name, pod.namespace, direction, family, options.isolateUnselectedPods, state.isolated, state.failClosed, failed, ...state.policies].join('\0');
}

function renderPodChain(
  pod: LocalPod,
  direction: Direction,
  family: IpFamily,
  options: NodeRenderOptions,
  failedPolicies: ReadonlySet<string>,
): NftRuleText[] | undefined {
  const plan = podChainPlan(pod, direction, options.isolateUnselectedPods, failedPolicies);
  if (!plan) return undefined;
  const who = podInComments(pod);
  const drop = (match: string): NftRuleText[] => [
    { text: `${match}limit rate 10/minute burst 10 packets log group ${NFLOG_GROUP}`, comment: `rule to log dropped traffic ${who}` },
    // `counter`: what the pod's policies rejected, for the verdict counters (read at scrape time).
    { text: `${match}counter reject`, comment: `rule to REJECT traffic ${direction === 'ingress' ? 'destined for' : 'from'} ${who}: ${plan.why}` },
  ];
  const common: NftRuleText = { text: `jump ${COMMON_CHAIN}`, comment: 'rule to drop invalid state and accept established traffic for pod' };
  if (plan.failClosed) return [common, ...drop('')];
  const rules: NftRuleText[] = [common, { text: CLEAR_POLICY_MARK }];
  if (direction === 'ingress') {
    rules.push({ text: 'fib saddr type local accept', comment: "rule to permit the traffic traffic to pods when source is the pod's local node" });
  }
  for (const id of plan.policies) {
    rules.push({ text: `jump ${policyChainName(id, direction, family)}`, comment: `run through nw policy ${id}` });
  }
  rules.push(
    ...drop(`meta mark & ${hex(POLICY_MARK)} == 0 `),
    { text: CLEAR_POLICY_MARK },
    { text: `meta mark set meta mark | ${hex(ACCEPT_MARK)}`, comment: 'set mark to ACCEPT traffic that comply to network policies' },
  );
  return rules;
}

function commonRules(family: IpFamily): NftRuleText[] {
  const rules: NftRuleText[] = [
    { text: 'ct state invalid drop', comment: 'rule to drop invalid state for pod' },
    { text: 'ct state related,established accept', comment: 'rule for stateful firewall for pod' },
  ];
  const icmp =
    family === 'ipv4'
      ? 'icmp type { echo-request, destination-unreachable, time-exceeded }'
      : 'icmpv6 type { echo-request, destination-unreachable, time-exceeded, nd-neighbor-solicit, nd-neighbor-advert }';
  rules.push({ text: `${icmp} accept`, comment: 'allow icmp' });
  return rules;
}

/**
 * The node's renders of one sync, per family and set of failed policies, each rendered once however often the apply
 * reads it, and kept for the next syncs while the model keeps its local pods (an event that changes only peers) and
 * the pod CIDRs stay.
 */
export class NodeRenderer {
  readonly #families: readonly IpFamily[];
  readonly #options: Omit<NodeRenderOptions, 'podCidrs'>;
  readonly #podChains = new PodChainCache();
  #kept: { pods: readonly LocalPod[]; podCidrs: string; renders: Map<string, NodeRender> } = { pods: [], podCidrs: '', renders: new Map() };

  constructor(families: readonly IpFamily[], options: Omit<NodeRenderOptions, 'podCidrs'>) {
    this.#families = families;
    this.#options = options;
  }

  render(model: PolicyModel, { podCidrs, failedPolicies }: NodeRenderInput): Readonly<Partial<Record<IpFamily, NodeRender>>> {
    const renderedFor = { pods: model.pods, podCidrs: podCidrs.join(',') };
    if (this.#kept.pods !== renderedFor.pods || this.#kept.podCidrs !== renderedFor.podCidrs) {
      this.#podChains.nextSync();
      this.#kept = { ...renderedFor, renders: new Map() };
    }
    const { renders } = this.#kept;
    const options = { ...this.#options, podCidrs };
    return renderedOnRead(this.#families, (family) => {
      const key = [family, ...[...failedPolicies].sort()].join('\0');
      let render = renders.get(key);
      if (!render) renders.set(key, (render = renderNode(model, family, options, failedPolicies, this.#podChains)));
      return render;
    });
  }
}
