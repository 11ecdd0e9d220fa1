/*
 * A reference for explainFlow's property test, written from the policies' side of the model rather than the pods'
 * index that explainFlow reads: which policies isolate a pod is found from each policy's targets and policyTypes, and
 * a direction is allowed when any rule of them admits the remote address and the port (the NetworkPolicy union).
 * Deliberately plain: no shared code with explain.ts beyond address parsing.
 */
import { cidrContainsIp, parseCidr, parseIp } from '../cidr.js';
import type { ParsedIp } from '../cidr.js';
import type { DirectionVerdict, ExplainOptions, Flow, RuleRef } from '../explain.js';
import type { CompiledPolicy, CompiledRule, Direction, PolicyModel } from '../model.js';

export interface OracleDirection {
  readonly verdict: DirectionVerdict;
  /** The policies isolating the side's pod in this direction, sorted. */
  readonly policies: readonly string[];
  /** Every rule of those policies that admits the flow (in policy id, then spec order). */
  readonly allowingRules: readonly RuleRef[];
}

export interface OracleVerdict {
  readonly allowed: boolean;
  readonly egress: OracleDirection;
  readonly ingress: OracleDirection;
}

/** What NetworkPolicy (and the agent's options) say about a well-formed flow, given the compiled model. */
export function oracleFlow(model: PolicyModel, flow: Flow, refused: ReadonlySet<string> = new Set(), options: ExplainOptions = {}): OracleVerdict {
  const source = parseIp(flow.source) as ParsedIp;
  const destination = parseIp(flow.destination) as ParsedIp;
  const egress = side(model, 'egress', source, destination, flow, refused, options);
  const ingress = side(model, 'ingress', destination, source, flow, refused, options);
  const open = (verdict: DirectionVerdict) => verdict === 'allowed' || verdict === 'not-isolated' || verdict === 'not-local';
  return { allowed: open(egress.verdict) && open(ingress.verdict), egress, ingress };
}

function side(
  model: PolicyModel,
  direction: Direction,
  own: ParsedIp,
  remote: ParsedIp,
  flow: Flow,
  refused: ReadonlySet<string>,
  options: ExplainOptions,
): OracleDirection {
  const pod = model.pods.find((candidate) => candidate.ips[own.family].includes(own.text));
  if (!pod) {
    const guarded = options.defaultDeny?.podCidrs.some((cidr) => cidrContainsIp(parseCidr(cidr), own)) ?? false;
    const rejected = guarded && options.defaultDeny?.isNodeAddress?.(own.text) !== true;
    return { verdict: rejected ? 'default-deny' : 'not-local', policies: [], allowingRules: [] };
  }
  const isolating = model.policies
    .filter((policy) => policy[direction].isolates && policy.targets.some((target) => target.pod === pod.id))
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const policies = isolating.map((policy) => policy.id);
  if (isolating.length === 0) {
    return { verdict: options.isolateUnselectedPods ? 'denied' : 'not-isolated', policies, allowingRules: [] };
  }
  if (isolating.some((policy) => policy[direction].failClosed || refused.has(policy.id))) {
    return { verdict: 'fail-closed', policies, allowingRules: [] };
  }
  const destination = direction === 'egress' ? remote : own;
  const allowingRules = isolating.flatMap((policy: CompiledPolicy) =>
    policy[direction].rules
      .filter((rule) => admits(rule, remote, destination, flow))
      .map((rule) => ({ policy: policy.id, direction, index: rule.index })),
  );
  return { verdict: allowingRules.length > 0 ? 'allowed' : 'denied', policies, allowingRules };
}

function admits(rule: CompiledRule, remote: ParsedIp, destination: ParsedIp, flow: Flow): boolean {
  const peer =
    rule.peers.any ||
    rule.peers.pods[remote.family].includes(remote.text) ||
    rule.peers.ipBlocks[remote.family].some(
      (block) => cidrContainsIp(parseCidr(block.cidr), remote) && block.except.every((except) => !cidrContainsIp(parseCidr(except), remote)),
    );
  if (!peer) return false;
  if (rule.allPorts) return true;
  const numbered = rule.ports.some(
    (range) => range.protocol === flow.protocol && (range.port === undefined || (flow.port >= range.port && flow.port <= (range.endPort ?? range.port))),
  );
  const named = rule.namedPorts.some(
    (entry) => entry.protocol === flow.protocol && entry.port === flow.port && entry.destinations[destination.family].includes(destination.text),
  );
  return numbered || named;
}
