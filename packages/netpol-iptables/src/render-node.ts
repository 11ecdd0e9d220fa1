import type { Direction, IpFamily, LocalPod, PolicyModel } from '@kube-router/netpol';
import { ACCEPT_MARK, LOCAL_PODS_SETS, POLICY_MARK, TOP_CHAINS } from './names.js';
import { COMMON_CHAIN, DEFAULT_CHAIN, NFLOG_GROUP, TAIL_CHAIN, cidrFamily, podChainName, podChainPlan, podInComments, policyChainName } from '@kube-router/netpol';
import { chain, comment, ipset } from './rules.js';
import type { ChainRender, SetRender } from './rules.js';

export interface NodeRenderOptions {
  /**
   * kube-router's --netpol-default-deny: the top-level chains end in the tail chain, which rejects addresses of
   * `podCidrs` that are not in the local pods set (pods whose rules are not programmed yet).
   */
  readonly defaultDeny: boolean;
  /** This node's pod CIDRs, either family; what default deny guards. */
  readonly podCidrs?: readonly string[];
  /** A stronger mode of its own: local pods that no policy selects are isolated both ways. */
  readonly isolateUnselectedPods?: boolean;
  readonly serviceClusterIpRanges: readonly string[];
  readonly serviceExternalIpRanges: readonly string[];
  /** `30000-32767`. */
  readonly nodePortRange: string;
}

/**
 * The chains that do not belong to one policy: the three top-level chains, the common and default chains, and one
 * chain per local pod and direction that policy applies to. `failedPolicies` are policies whose own chains or sets
 * could not be programmed: their targets fail closed like the targets of a policy that did not compile.
 */
export function renderNode(
  model: PolicyModel,
  family: IpFamily,
  options: NodeRenderOptions,
  failedPolicies: ReadonlySet<string> = new Set(),
): ChainRender[] {
  const input: string[] = [...serviceExemptions(family, options)];
  const forwardEgress: string[] = [];
  const forwardIngress: string[] = [];
  const output: string[] = [];
  const podChains: ChainRender[] = [];

  for (const pod of model.pods) {
    const ips = pod.ips[family];
    if (ips.length === 0) continue;
    for (const direction of ['egress', 'ingress'] as const) {
      const rules = renderPodChain(pod, direction, family, options, failedPolicies);
      if (!rules) continue;
      const name = podChainName(pod.id, direction, family);
      podChains.push(chain(name, rules));
      const verb = direction === 'ingress' ? 'destined to' : 'from';
      const note = comment(`rule to jump traffic ${verb} POD name:${pod.name} namespace: ${pod.namespace} to chain ${name}`);
      for (const ip of ips) {
        if (direction === 'egress') {
          // From the pod: routed elsewhere (FORWARD) or to the node itself (INPUT).
          forwardEgress.push(`${note} -s ${ip} -j ${name}`);
          input.push(`${note} -s ${ip} -j ${name}`);
        } else {
          // To the pod: routed from elsewhere (FORWARD) or sent by the node itself (OUTPUT).
          forwardIngress.push(`${note} -d ${ip} -j ${name}`);
          output.push(`${note} -d ${ip} -j ${name}`);
        }
      }
    }
  }

  const accept = `${comment('rule to explicitly ACCEPT traffic that comply to network policies')} -m mark --mark ${ACCEPT_MARK} -j ACCEPT`;
  const tail = options.defaultDeny ? [`${comment('netpol accept/reject')} -j ${TAIL_CHAIN}`] : [];
  return [
    chain(TOP_CHAINS.INPUT, [...input, ...tail, accept]),
    chain(TOP_CHAINS.FORWARD, [...forwardEgress, ...forwardIngress, ...tail, accept]),
    chain(TOP_CHAINS.OUTPUT, [...output, ...tail, accept]),
    ...renderSharedChains(family),
    ...(options.defaultDeny ? [renderTailChain(family, options.podCidrs ?? [])] : []),
    ...podChains,
  ];
}

/**
 * kube-router's KUBE-NWPLCY-TAIL with --netpol-default-deny: an address of the node's pod CIDRs that is not in the
 * local pods set has no programmed rules yet and is rejected, before the accept of what a pod chain passed (so an
 * unprogrammed pod cannot get in on a programmed peer's pass). The node's own addresses (a bridge gateway inside the
 * pod CIDR) are not pods. Pods that no policy selects are in the set and have no pod chain: they stay open.
 */
export function renderTailChain(family: IpFamily, podCidrs: readonly string[]): ChainRender {
  const set = LOCAL_PODS_SETS[family];
  const note = comment('reject unprogrammed local pod (default-deny)');
  const rules: string[] = [];
  for (const cidr of podCidrs.filter((candidate) => cidrFamily(candidate) === family)) {
    rules.push(
      `${note} -s ${cidr} -m set ! --match-set ${set} src -m addrtype ! --src-type LOCAL -j REJECT`,
      `${note} -d ${cidr} -m set ! --match-set ${set} dst -m addrtype ! --dst-type LOCAL -j REJECT`,
    );
  }
  rules.push(`${comment('rule to explicitly ACCEPT traffic that comply to network policies')} -m mark --mark ${ACCEPT_MARK} -j ACCEPT`);
  return chain(TAIL_CHAIN, rules);
}

/** The local pods set of a family: every local pod address, once its chains are programmed. */
export function renderLocalPodsSet(model: PolicyModel, family: IpFamily): SetRender {
  const ips = [...new Set(model.pods.flatMap((pod) => pod.ips[family]))].sort();
  return ipset({ name: LOCAL_PODS_SETS[family], type: 'hash:ip', family, ...(ips.length * 2 > 65_536 ? { maxElements: 2 ** Math.ceil(Math.log2(ips.length * 2)) } : {}) }, ips);
}

/**
 * The chains that policy chains jump to (the default mark) and pod chains share (the stateful rules). They refer to
 * no other chain, so they can be written before everything else.
 */
export function renderSharedChains(family: IpFamily): ChainRender[] {
  return [
    chain(COMMON_CHAIN, commonRules(family)),
    chain(DEFAULT_CHAIN, [`${comment('rule to mark traffic matching a network policy')} -j MARK --set-xmark ${POLICY_MARK}`]),
  ];
}

/** The rules of a pod's chain in one direction, or undefined when nothing restricts that direction. */
function renderPodChain(
  pod: LocalPod,
  direction: Direction,
  family: IpFamily,
  options: NodeRenderOptions,
  failedPolicies: ReadonlySet<string>,
): string[] | undefined {
  const plan = podChainPlan(pod, direction, options.isolateUnselectedPods ?? false, failedPolicies);
  if (!plan) return undefined;
  const who = podInComments(pod);
  const [log, reject] = [
    `${comment(`rule to log dropped traffic ${who}`)} -j NFLOG --nflog-group ${NFLOG_GROUP} -m limit --limit 10/minute --limit-burst 10`,
    `${comment(`rule to REJECT traffic ${direction === 'ingress' ? 'destined for' : 'from'} ${who}: ${plan.why}`)} -j REJECT`,
  ];
  const common = `${comment('rule to drop invalid state and accept established traffic for pod')} -j ${COMMON_CHAIN}`;
  if (plan.failClosed) return [common, log, reject];
  const rules = [common, `-j MARK --set-mark 0/${POLICY_MARK.split('/')[1]}`];
  if (direction === 'ingress') {
    for (const ip of pod.ips[family]) {
      rules.push(
        `${comment("rule to permit the traffic traffic to pods when source is the pod's local node")} -m addrtype --src-type LOCAL -d ${ip} -j ACCEPT`,
      );
    }
  }
  for (const id of plan.policies) {
    rules.push(`${comment(`run through nw policy ${id}`)} -j ${policyChainName(id, direction, family)}`);
  }
  rules.push(
    `-m mark ! --mark ${POLICY_MARK} ${log}`,
    `-m mark ! --mark ${POLICY_MARK} ${reject}`,
    `-j MARK --set-mark 0/${POLICY_MARK.split('/')[1]}`,
    `${comment('set mark to ACCEPT traffic that comply to network policies')} -j MARK --set-mark ${ACCEPT_MARK}`,
  );
  return rules;
}

function commonRules(family: IpFamily): string[] {
  const rules = [
    `${comment('rule to drop invalid state for pod')} -m conntrack --ctstate INVALID -j DROP`,
    `${comment('rule for stateful firewall for pod')} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
  ];
  const icmp =
    family === 'ipv4'
      ? ['echo-request', 'destination-unreachable', 'time-exceeded'].map((type) => `-p icmp -m icmp --icmp-type ${type}`)
      : ['echo-request', 'destination-unreachable', 'time-exceeded', 'neighbour-solicitation', 'neighbour-advertisement'].map(
          (type) => `-p ipv6-icmp -m icmp6 --icmpv6-type ${type}`,
        );
  for (const match of icmp) rules.push(`${comment('allow icmp')} ${match} -j ACCEPT`);
  return rules;
}

/** Traffic to services is handed on to the service proxy: it is not the pods' own traffic yet. */
function serviceExemptions(family: IpFamily, options: NodeRenderOptions): string[] {
  const rules: string[] = [];
  for (const range of options.serviceClusterIpRanges.filter((cidr) => cidrFamily(cidr) === family)) {
    rules.push(`${comment('allow traffic to cluster IP range')} -d ${range} -j RETURN`);
  }
  const ports = options.nodePortRange.replace('-', ':');
  for (const protocol of ['tcp', 'udp']) {
    rules.push(
      `-p ${protocol} ${comment(`allow LOCAL ${protocol.toUpperCase()} traffic to node ports`)} -m addrtype --dst-type LOCAL -m multiport --dports ${ports} -j RETURN`,
    );
  }
  for (const range of options.serviceExternalIpRanges.filter((cidr) => cidrFamily(cidr) === family)) {
    rules.push(`${comment(`allow traffic to external IP range: ${range}`)} -d ${range} -j RETURN`);
  }
  return rules;
}
