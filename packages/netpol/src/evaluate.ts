import { cidrContainsIp, parseCidr, parseIp } from './cidr.js';
import type { ParsedIp } from './cidr.js';
import type { CompiledPolicy, CompiledRule, Direction, LocalPod, PolicyModel, PortRange, Protocol } from './model.js';

export interface Flow {
  readonly source: string;
  readonly destination: string;
  readonly protocol: Protocol;
  readonly port: number;
}

/**
 * `not-local`: the pod on that side is not on this node (its own node decides); `not-isolated`: no policy isolates
 * it in that direction; `allowed` / `denied`: the policies decided; `fail-closed`: a policy for it failed to compile.
 */
export type DirectionVerdict = 'not-local' | 'not-isolated' | 'allowed' | 'denied' | 'fail-closed';

export interface FlowVerdict {
  /** Both sides let the flow through. */
  readonly allowed: boolean;
  /** The verdict of the source pod's egress policies. */
  readonly egress: DirectionVerdict;
  /** The verdict of the destination pod's ingress policies. */
  readonly ingress: DirectionVerdict;
}

/**
 * What the model says about one flow, evaluated straight from the model as a reference for renderers: their tests
 * can send real traffic and compare the kernel's verdict with this one.
 */
export function evaluateFlow(model: PolicyModel, flow: Flow): FlowVerdict {
  const source = parseIp(flow.source);
  const destination = parseIp(flow.destination);
  if (!source || !destination) throw new RangeError(`invalid flow address in ${JSON.stringify(flow)}`);
  const policies = new Map(model.policies.map((policy) => [policy.id, policy]));
  const egress = decide('egress', podWithIp(model, source), destination, destination, flow, policies);
  const ingress = decide('ingress', podWithIp(model, destination), source, destination, flow, policies);
  const passes = (verdict: DirectionVerdict) =>
    verdict === 'not-local' || verdict === 'not-isolated' || verdict === 'allowed';
  return { allowed: passes(egress) && passes(ingress), egress, ingress };
}

function decide(
  direction: Direction,
  pod: LocalPod | undefined,
  remote: ParsedIp,
  destination: ParsedIp,
  flow: Flow,
  policies: ReadonlyMap<string, CompiledPolicy>,
): DirectionVerdict {
  if (!pod) return 'not-local';
  const state = pod[direction];
  if (!state.isolated) return 'not-isolated';
  if (state.failClosed) return 'fail-closed';
  for (const id of state.policies) {
    const policy = policies.get(id);
    if (policy?.[direction].rules.some((rule) => ruleAllows(rule, remote, destination, flow))) return 'allowed';
  }
  return 'denied';
}

function ruleAllows(rule: CompiledRule, remote: ParsedIp, destination: ParsedIp, flow: Flow): boolean {
  const toNamedPort = rule.namedPorts.some(
    (named) =>
      named.protocol === flow.protocol &&
      named.port === flow.port &&
      named.destinations[destination.family].includes(destination.text),
  );
  if (!peersInclude(rule, remote)) return false;
  return rule.allPorts || rule.ports.some((range) => portMatches(range, flow)) || toNamedPort;
}

function peersInclude(rule: CompiledRule, ip: ParsedIp): boolean {
  if (rule.peers.any) return true;
  if (rule.peers.pods[ip.family].includes(ip.text)) return true;
  return rule.peers.ipBlocks[ip.family].some(
    (block) =>
      cidrContainsIp(parseCidr(block.cidr), ip) &&
      !block.except.some((except) => cidrContainsIp(parseCidr(except), ip)),
  );
}

function portMatches(range: PortRange, flow: Flow): boolean {
  if (range.protocol !== flow.protocol) return false;
  if (range.port === undefined) return true;
  return flow.port >= range.port && flow.port <= (range.endPort ?? range.port);
}

function podWithIp(model: PolicyModel, ip: ParsedIp): LocalPod | undefined {
  return model.pods.find((pod) => pod.ips[ip.family].includes(ip.text));
}
