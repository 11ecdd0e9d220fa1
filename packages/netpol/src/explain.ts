import { cidrContainsIp, parseCidr, parseIp } from './cidr.js';
import type { ParsedIp } from './cidr.js';
import type { CompiledPolicy, CompiledRule, Direction, LocalPod, PolicyModel, PortRange, Protocol } from './model.js';

const PROTOCOLS: readonly Protocol[] = ['TCP', 'UDP', 'SCTP'];

/** A new connection: two addresses of one family, a protocol and a destination port. */
export interface Flow {
  readonly source: string;
  readonly destination: string;
  readonly protocol: Protocol;
  readonly port: number;
}

/**
 * `not-local`: the pod on that side is not on this node (its own node decides); `not-isolated`: no policy isolates
 * it in that direction; `allowed` / `denied`: the policies decided; `fail-closed`: a policy for it failed to compile
 * or the kernel refused its rules; `default-deny`: the address is in this node's pod CIDRs but is no pod of the
 * applied model (a pod started since the last sync), and --netpol-default-deny's tail chain rejects it.
 */
export type DirectionVerdict = 'not-local' | 'not-isolated' | 'allowed' | 'denied' | 'fail-closed' | 'default-deny';

/** A rule of a policy: `spec.ingress[index]` or `spec.egress[index]` of the policy `namespace/name`. */
export interface RuleRef {
  readonly policy: string;
  readonly direction: Direction;
  readonly index: number;
}

/** Why one side of a flow lets it through or not. */
export interface DirectionExplanation {
  readonly verdict: DirectionVerdict;
  /** The local pod on this side (`namespace/name`): the source for egress, the destination for ingress. */
  readonly pod?: string;
  /** The policies isolating that pod in this direction, sorted; empty when none does. */
  readonly policies: readonly string[];
  /** The first rule (policies in id order, rules in spec order) that allows the flow, when one does. */
  readonly rule?: RuleRef;
  /** Of `policies`, those that failed closed (a compile error in this direction, or refused by the kernel). */
  readonly failedPolicies: readonly string[];
}

export interface FlowExplanation {
  /** Both sides let the flow through. */
  readonly allowed: boolean;
  /** The source pod's egress policies. */
  readonly egress: DirectionExplanation;
  /** The destination pod's ingress policies. */
  readonly ingress: DirectionExplanation;
}

export interface ExplainOptions {
  /**
   * The backend's isolateUnselectedPods: a local pod that no policy isolates in a direction is denied in it, as its
   * chain does (podChainPlan).
   */
  readonly isolateUnselectedPods?: boolean;
  /**
   * --netpol-default-deny as the last sync applied it: the tail chain rejects a source or destination in `podCidrs`
   * (this node's) that is not a pod of the model, unless it is an address of the node itself (`fib type local` /
   * `addrtype LOCAL`, a bridge gateway inside the pod CIDR).
   */
  readonly defaultDeny?: DefaultDenyState;
}

/** The default-deny tail chain's inputs: this node's pod CIDRs, and which addresses are the node's own. */
export interface DefaultDenyState {
  readonly podCidrs: readonly string[];
  readonly isNodeAddress?: (ip: string) => boolean;
}

/** A flow that is not one: a bad address, port or protocol. Callers show the message (HTTP 400, exit code 2). */
export class FlowInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FlowInputError';
  }
}

/**
 * What the model, as it was applied, does with one flow and why: per direction the verdict, the policies isolating
 * that side and the rule that allows the flow. `failedPolicies` are the policies the kernel refused (their pods fail
 * closed in every direction those policies isolate, as the renderers do); compile errors are in the model itself.
 * Throws FlowInputError for a malformed flow.
 */
export function explainFlow(
  model: PolicyModel,
  flow: Flow,
  failedPolicies: ReadonlySet<string> = new Set(),
  options: ExplainOptions = {},
): FlowExplanation {
  const source = parseIp(flow.source);
  const destination = parseIp(flow.destination);
  if (!source) throw new FlowInputError(`source ${JSON.stringify(flow.source)} is not an IP address`);
  if (!destination) throw new FlowInputError(`destination ${JSON.stringify(flow.destination)} is not an IP address`);
  if (source.family !== destination.family) {
    throw new FlowInputError(`source ${source.text} and destination ${destination.text} are of different address families`);
  }
  if (!PROTOCOLS.includes(flow.protocol)) {
    throw new FlowInputError(`protocol ${JSON.stringify(flow.protocol)} is not one of ${PROTOCOLS.join(', ')}`);
  }
  if (!Number.isInteger(flow.port) || flow.port < 1 || flow.port > 65535) {
    throw new FlowInputError(`port ${JSON.stringify(flow.port)} is not an integer in 1-65535`);
  }
  const policies = new Map(model.policies.map((policy) => [policy.id, policy]));
  const context = { destination, flow, policies, failedPolicies, options };
  const egress = decide('egress', podWithIp(model, source), source, destination, context);
  const ingress = decide('ingress', podWithIp(model, destination), destination, source, context);
  return { allowed: passes(egress.verdict) && passes(ingress.verdict), egress, ingress };
}

/** Whether a direction with this verdict lets the flow through. */
export function passes(verdict: DirectionVerdict): boolean {
  return verdict === 'not-local' || verdict === 'not-isolated' || verdict === 'allowed';
}

interface DecideContext {
  readonly destination: ParsedIp;
  readonly flow: Flow;
  readonly policies: ReadonlyMap<string, CompiledPolicy>;
  readonly failedPolicies: ReadonlySet<string>;
  readonly options: ExplainOptions;
}

function decide(direction: Direction, pod: LocalPod | undefined, own: ParsedIp, remote: ParsedIp, context: DecideContext): DirectionExplanation {
  if (!pod) {
    const verdict = rejectedByDefaultDeny(own, context.options.defaultDeny) ? 'default-deny' : 'not-local';
    return { verdict, policies: [], failedPolicies: [] };
  }
  const state = pod[direction];
  const base = { pod: pod.id, policies: state.policies };
  if (!state.isolated) {
    return { ...base, verdict: context.options.isolateUnselectedPods ? 'denied' : 'not-isolated', failedPolicies: [] };
  }
  const failed = state.policies.filter(
    (id) => context.failedPolicies.has(id) || context.policies.get(id)?.[direction].failClosed === true,
  );
  if (state.failClosed || failed.length > 0) return { ...base, verdict: 'fail-closed', failedPolicies: failed };
  for (const id of state.policies) {
    const rule = context.policies.get(id)?.[direction].rules.find((candidate) => ruleAllows(candidate, remote, context));
    if (rule) return { ...base, verdict: 'allowed', rule: { policy: id, direction, index: rule.index }, failedPolicies: [] };
  }
  return { ...base, verdict: 'denied', failedPolicies: [] };
}

/** The tail chain's rule for this side's address (`-s`/`saddr` for egress, `-d`/`daddr` for ingress): no pod of the model is assumed. */
function rejectedByDefaultDeny(ip: ParsedIp, state: DefaultDenyState | undefined): boolean {
  if (!state) return false;
  return state.podCidrs.some((cidr) => cidrContainsIp(parseCidr(cidr), ip)) && state.isNodeAddress?.(ip.text) !== true;
}

function ruleAllows(rule: CompiledRule, remote: ParsedIp, { destination, flow }: DecideContext): boolean {
  if (!peersInclude(rule, remote)) return false;
  const toNamedPort = rule.namedPorts.some(
    (named) =>
      named.protocol === flow.protocol &&
      named.port === flow.port &&
      named.destinations[destination.family].includes(destination.text),
  );
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
