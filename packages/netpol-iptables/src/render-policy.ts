import type { CompiledPolicy, CompiledRule, Direction, IpFamily, PortRange } from '@kube-router/netpol';
import { ipsetNetElements } from '@kube-router/netfilter';
import type { IpsetMember } from '@kube-router/netfilter';
import { POLICY_MARK, ipBlockSetName, namedPortSetName, peerPodSetName, targetSetName } from './names.js';
import { DEFAULT_CHAIN, ruleSetKey, policyChainName } from '@kube-router/netpol';
import type { NetpolPolicyRender, PolicyFamilyObjects } from '@kube-router/netpol';
import { chain, comment, ipset } from './rules.js';
import type { ChainRender, SetRender } from './rules.js';

/** What one policy puts in the kernel for one family: its chains and ipsets. */
export type PolicyFamilyRender = PolicyFamilyObjects<ChainRender, SetRender>;
export type PolicyRender = NetpolPolicyRender<ChainRender, SetRender>;

const DIRECTIONS: readonly Direction[] = ['ingress', 'egress'];

/**
 * Renders a policy's chains (one per isolating direction) and sets for each family. A direction that failed to
 * compile gets no chain: the pod chains of its targets drop that direction instead (see render-node).
 */
export function renderPolicy(policy: CompiledPolicy, families: readonly IpFamily[]): PolicyRender {
  const rendered: Partial<Record<IpFamily, PolicyFamilyRender>> = {};
  for (const family of families) {
    const targets = policy.targetIPs[family];
    if (targets.length === 0) continue;
    const chains: ChainRender[] = [];
    const sets: SetRender[] = [];
    const targetSet = targetSetName(policy.id, family);
    sets.push(ipset({ name: targetSet, type: 'hash:ip', family, ...sizeFor(targets.length) }, targets));
    for (const direction of DIRECTIONS) {
      const compiled = policy[direction];
      if (!compiled.isolates || compiled.failClosed) continue;
      const rules: string[] = [];
      for (const rule of compiled.rules) rules.push(...renderRule(policy, direction, rule, family, targetSet, sets));
      chains.push(chain(policyChainName(policy.id, direction, family), rules));
    }
    rendered[family] = { chains, sets };
  }
  return { id: policy.id, families: rendered };
}

function renderRule(
  policy: CompiledPolicy,
  direction: Direction,
  rule: CompiledRule,
  family: IpFamily,
  targetSet: string,
  sets: SetRender[],
): string[] {
  const remote = direction === 'ingress' ? 'src' : 'dst';
  const local = direction === 'ingress' ? 'dst' : 'src';
  const targetMatch = `-m set --match-set ${targetSet} ${local}`;

  const peerMatches: string[] = [];
  if (rule.peers.any) {
    peerMatches.push('');
  } else {
    const pods = rule.peers.pods[family];
    if (pods.length > 0) {
      const name = peerPodSetName(policy.id, direction, ruleSetKey(rule), family);
      sets.push(ipset({ name, type: 'hash:ip', family, ...sizeFor(pods.length) }, pods));
      peerMatches.push(`-m set --match-set ${name} ${remote}`);
    }
    rule.peers.ipBlocks[family].forEach((block) => {
      const name = ipBlockSetName(policy.id, direction, ruleSetKey(rule), block.cidr, family);
      const members: IpsetMember[] = [
        ...ipsetNetElements(block.cidr),
        ...block.except.flatMap((cidr) => ipsetNetElements(cidr).map((element) => ({ element, nomatch: true }))),
      ];
      sets.push(ipset({ name, type: 'hash:net', family, ...sizeFor(members.length) }, members));
      peerMatches.push(`-m set --match-set ${name} ${remote}`);
    });
  }
  if (peerMatches.length === 0) return [];

  const portMatches: string[] = [];
  if (rule.allPorts) portMatches.push('');
  for (const port of rule.ports) portMatches.push(portMatch(port));
  rule.namedPorts.forEach((entry) => {
    const destinations = entry.destinations[family];
    if (destinations.length === 0) return;
    const key = `${entry.name}/${entry.protocol}/${entry.port}`;
    const name = namedPortSetName(policy.id, direction, rule.index, key, family);
    sets.push(ipset({ name, type: 'hash:ip', family, ...sizeFor(destinations.length) }, destinations));
    portMatches.push(`${portMatch({ protocol: entry.protocol, port: entry.port })} -m set --match-set ${name} dst`);
  });

  const what = direction === 'ingress' ? 'from source pods to dest pods' : 'from pods to destinations';
  const note = comment(`rule to ACCEPT traffic ${what} selected by policy name: ${policy.name} namespace ${policy.namespace}`);
  const lines: string[] = [];
  for (const peer of peerMatches) {
    for (const port of portMatches) {
      const match = [note, targetMatch, peer, port].filter(Boolean).join(' ');
      if (peer === '' && port === '') {
        lines.push(`${match} -j ${DEFAULT_CHAIN}`);
      } else {
        lines.push(`${match} -j MARK --set-xmark ${POLICY_MARK}`);
      }
      lines.push(`${match} -m mark --mark ${POLICY_MARK} -j RETURN`);
    }
  }
  return lines;
}

export function portMatch(port: PortRange): string {
  const protocol = port.protocol.toLowerCase();
  if (port.port === undefined) return `-p ${protocol}`;
  const range = port.endPort !== undefined && port.endPort !== port.port ? `${port.port}:${port.endPort}` : `${port.port}`;
  return `-p ${protocol} -m ${protocol} --dport ${range}`;
}

/** ipset refuses more members than maxelem (65536 by default): big sets are created large enough. */
function sizeFor(count: number): { maxElements?: number } {
  return count * 2 > 65_536 ? { maxElements: 2 ** Math.ceil(Math.log2(count * 2)) } : {};
}
