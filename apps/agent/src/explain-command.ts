import { parseArgs } from 'node:util';
import { messageOf } from '@kube-router/controller';
import type { ServiceEndpointPath, ServicePath } from '@kube-router/controller';
import type { DirectionExplanation, ExplainAnswer, ExplainEndpoint, Flow } from '@kube-router/netpol';
import { parseGoDuration } from './duration.js';
import type { CliDependencies } from './run-cli.js';
import { cliOutput } from './cli-output.js';

/** `kube-router explain`'s exit codes: 0 the flow is allowed, 1 it is denied, 2 bad arguments or no answer. */
export const EXPLAIN_EXIT = { allowed: 0, denied: 1, trouble: 2 } as const;

/** The agent asked when no --agent is given: this node's metrics server on the port the deploy/ manifests give it. */
export const DEFAULT_EXPLAIN_AGENT = 'http://127.0.0.1:20245';

const USAGE = `Usage: kube-router explain --from <ns/pod | ip> --to <ns/pod | ip>:<port>[/<tcp|udp|sctp>] [flags]

Asks agents started with --enable-explain (on their metrics server) what their network policies do with a new
connection, and why: the policies that select each side and the rule that allows it, or that none does.
Egress is decided by the agent on the source pod's node, ingress by the agent on the destination pod's node.

Flags:
      --agent stringArray   an agent's metrics server, repeatable (default ${DEFAULT_EXPLAIN_AGENT})
      --from string         the source: a pod as namespace/name, or an IP address
      --to string           the destination and port: ns/pod:80, 10.0.0.5:53/udp, [fd00::5]:443/tcp
  -o, --output string       text (default) or json
      --timeout duration    how long to wait for each agent (default 5s)
  -h, --help                this help

Exit codes: 0 allowed, 1 denied, 2 bad arguments, or the agents asked cannot decide it.
`;

/** An agent's answer: the policy verdict, and the Service path when the destination is a Service its proxy serves. */
type AgentAnswer = ExplainAnswer & { readonly service?: ServicePath; readonly serviceError?: string };

/** What one agent said. */
interface AgentReply {
  readonly agent: string;
  readonly answer?: AgentAnswer;
  readonly error?: string;
  /** The HTTP status of a refusal: 400 the request is wrong (the same everywhere), 503 not synced yet. */
  readonly status?: number;
}

/** One direction as the merge decided it. */
export interface MergedDirection extends Partial<DirectionExplanation> {
  /** Whether this direction lets the flow through; undefined when no agent asked decides it. */
  readonly passes: boolean | undefined;
  /** The node whose agent decided, and that agent's URL. */
  readonly decidedBy?: { readonly node: string; readonly agent: string };
  /** Why no agent decided: the side is no pod, or its pod's node was not asked. */
  readonly note?: string;
}

/**
 * A flow to a Service address: the proxy's path (from the agent whose kernel holds the client's connections, else the
 * client's node) and, since policies see the endpoint the proxy chose rather than the Service address, the verdict of
 * the same flow to each endpoint.
 */
export interface ServiceExplanation {
  readonly node: string;
  readonly path: ServicePath;
  readonly endpoints: readonly { readonly endpoint: ServiceEndpointPath; readonly explanation: MergedExplanation | string }[];
}

export interface MergedExplanation {
  /**
   * `undecided`: a direction belongs to a node none of the agents asked runs on. `partly`: a flow to a Service whose
   * endpoints' verdicts differ (each connection gets the verdict of the endpoint the proxy chooses).
   */
  readonly verdict: 'allowed' | 'denied' | 'undecided' | 'partly';
  readonly flow: Flow;
  readonly from: ExplainEndpoint;
  readonly to: ExplainEndpoint;
  readonly egress: MergedDirection;
  readonly ingress: MergedDirection;
  readonly agents: readonly {
    readonly agent: string;
    readonly node?: string;
    readonly appliedAt?: string;
    /** The agent's last sync failed to write these parts of the node's rules. */
    readonly writeFailures?: readonly string[];
    readonly error?: string;
  }[];
  readonly service?: ServiceExplanation;
}

/** `kube-router explain ...`: asks the agents, merges their answers, prints them; resolves with the exit code. */
export async function runExplain(argv: readonly string[], deps: CliDependencies = {}): Promise<number> {
  const { stdout, stderr } = cliOutput(deps);
  const usage = (message: string) => {
    stderr(`kube-router explain: ${message}\n(run kube-router explain --help for usage)\n`);
    return EXPLAIN_EXIT.trouble;
  };
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        agent: { type: 'string', multiple: true },
        from: { type: 'string' },
        to: { type: 'string' },
        output: { type: 'string', short: 'o', default: 'text' },
        timeout: { type: 'string', default: '5s' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }).values;
  } catch (error) {
    return usage(messageOf(error));
  }
  if (parsed.help) {
    stdout(USAGE);
    return EXPLAIN_EXIT.allowed;
  }
  if (parsed.output !== 'text' && parsed.output !== 'json') return usage(`-o must be text or json, got ${JSON.stringify(parsed.output)}`);
  if (parsed.from === undefined) return usage('--from is required');
  if (parsed.to === undefined) return usage('--to is required');
  let timeoutMs: number;
  try {
    timeoutMs = parseGoDuration(parsed.timeout);
  } catch (error) {
    return usage(`--timeout: ${messageOf(error)}`);
  }
  if (!(timeoutMs > 0)) return usage('--timeout must be greater than 0');
  const to = parseDestination(parsed.to);
  if (typeof to === 'string') return usage(to);
  const agents = parsed.agent ?? [DEFAULT_EXPLAIN_AGENT];
  for (const agent of agents) {
    if (!URL.canParse(agent) || !/^https?:$/.test(new URL(agent).protocol)) return usage(`--agent ${JSON.stringify(agent)} is not an http(s) URL`);
  }

  const query = new URLSearchParams({ from: parsed.from, to: to.target, port: String(to.port), protocol: to.protocol });
  const replies = await Promise.all(agents.map((agent) => ask(agent, query, timeoutMs)));
  const refused = replies.find((reply) => reply.status === 400);
  if (refused) return usage(refused.error ?? 'the agent refused the request');
  let merged = mergeReplies(replies);
  if (typeof merged === 'string') {
    stderr(`kube-router explain: ${merged}\n`);
    return EXPLAIN_EXIT.trouble;
  }
  const withPath = servicePathReply(replies, merged.from);
  if (withPath) {
    const endpoints = await Promise.all(
      withPath.answer.service.endpoints.map(async (endpoint) => {
        const perEndpoint = new URLSearchParams({ from: parsed.from!, to: endpoint.address, port: String(endpoint.port), protocol: to.protocol });
        return { endpoint, explanation: mergeReplies(await Promise.all(agents.map((agent) => ask(agent, perEndpoint, timeoutMs)))) };
      }),
    );
    merged = withService(merged, { node: withPath.answer.node, path: withPath.answer.service, endpoints });
  }
  stdout(parsed.output === 'json' ? `${JSON.stringify(merged, null, 2)}\n` : formatExplanation(merged));
  return merged.verdict === 'allowed' ? EXPLAIN_EXIT.allowed : merged.verdict === 'denied' || merged.verdict === 'partly' ? EXPLAIN_EXIT.denied : EXPLAIN_EXIT.trouble;
}

/**
 * The reply with the Service path to show: the one whose kernel holds connections of the client (the proxy on the
 * client's node chose their endpoints), else the client's node's, else the first.
 */
function servicePathReply(replies: readonly AgentReply[], from: ExplainEndpoint): (AgentReply & { answer: AgentAnswer & { service: ServicePath } }) | undefined {
  const withPaths = replies.filter((reply): reply is AgentReply & { answer: AgentAnswer & { service: ServicePath } } => reply.answer?.service !== undefined);
  return (
    withPaths.find((reply) => reply.answer.service.connections.length > 0) ??
    withPaths.find((reply) => from.node !== undefined && reply.answer.node === from.node) ??
    withPaths[0]
  );
}

/** A flow to a Service: its verdict is its endpoints', all of them (a Service without endpoints answers nobody). */
export function withService(merged: MergedExplanation, service: ServiceExplanation): MergedExplanation {
  const verdicts = new Set(service.endpoints.map(({ explanation }) => (typeof explanation === 'string' ? 'undecided' : explanation.verdict)));
  // An endpoint no agent asked decides may allow the flow or not: with one, the whole is undecided.
  const verdict =
    verdicts.size === 0
      ? 'denied'
      : verdicts.has('undecided')
        ? 'undecided'
        : verdicts.size === 1
          ? ([...verdicts][0] as MergedExplanation['verdict'])
          : verdicts.has('allowed')
            ? 'partly'
            : 'denied';
  return { ...merged, verdict, service };
}

/** `ns/pod:80`, `10.0.0.5:53/udp`, `[fd00::5]:443/tcp`; a message when it is none of those. */
export function parseDestination(text: string): { target: string; port: number; protocol: string } | string {
  const match = /^(?:\[(?<v6>[^\]]+)\]|(?<host>[^:[\]]+)):(?<port>\d{1,5})(?:\/(?<protocol>[A-Za-z]+))?$/.exec(text);
  const target = match?.groups?.v6 ?? match?.groups?.host;
  if (!match?.groups || target === undefined) {
    return `--to ${JSON.stringify(text)}: give a destination and port, such as ns/pod:80, 10.0.0.5:53/udp or [fd00::5]:443/tcp`;
  }
  const port = Number(match.groups.port);
  if (port < 1 || port > 65535) return `--to ${JSON.stringify(text)}: port ${port} is not in 1-65535`;
  const protocol = (match.groups.protocol ?? 'tcp').toUpperCase();
  if (!['TCP', 'UDP', 'SCTP'].includes(protocol)) return `--to ${JSON.stringify(text)}: protocol ${match.groups.protocol} is not tcp, udp or sctp`;
  return { target, port, protocol };
}

async function ask(agent: string, query: URLSearchParams, timeoutMs: number): Promise<AgentReply> {
  const url = new URL('/explain', agent);
  url.search = query.toString();
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    const body = (await response.json().catch(() => undefined)) as { error?: unknown } | ExplainAnswer | undefined;
    if (response.ok && body && 'explanation' in body) return { agent, answer: body };
    // Fastify's own 404 has an `error` field too ("Not Found"): the route's absence is said first.
    const error =
      response.status === 404
        ? 'no /explain here: is the agent started with --enable-explain and the firewall on?'
        : body && 'error' in body && typeof body.error === 'string'
          ? body.error
          : `HTTP ${response.status}`;
    return { agent, error, status: response.status };
  } catch (error) {
    return { agent, error: messageOf(error) };
  }
}

/**
 * Egress from the agent where the source pod is local, ingress from the one where the destination is: the agents
 * answer `not-local` for the other side. A side that is no pod passes (no policy of this cluster applies to it).
 */
export function mergeReplies(replies: readonly AgentReply[]): MergedExplanation | string {
  const answered = replies.filter((reply): reply is AgentReply & { answer: ExplainAnswer } => reply.answer !== undefined);
  const first = answered[0]?.answer;
  if (!first) return `no agent answered:\n${replies.map((reply) => `  ${reply.agent}: ${reply.error ?? 'no answer'}`).join('\n')}`;
  const nodesAsked = new Set(answered.map((reply) => reply.answer.node));
  const direction = (which: 'egress' | 'ingress'): MergedDirection => {
    const side = which === 'egress' ? first.from : first.to;
    const decider = answered.find((reply) => reply.answer.explanation[which].verdict !== 'not-local');
    if (decider) {
      const explained = decider.answer.explanation[which];
      const passes = explained.verdict === 'allowed' || explained.verdict === 'not-isolated';
      return { ...explained, passes, decidedBy: { node: decider.answer.node, agent: decider.agent } };
    }
    if (side.pod === undefined) return { passes: true, note: `${side.ip} is no pod of the cluster: no network policy applies to it` };
    if (side.node !== undefined && nodesAsked.has(side.node)) {
      return { passes: true, note: `${side.pod} is not enforced on ${side.node} (host network, or not running)` };
    }
    return { passes: undefined, note: `not decided by any agent asked: ${side.pod} runs on ${side.node ?? 'no node yet'}` };
  };
  const egress = direction('egress');
  const ingress = direction('ingress');
  const verdict =
    egress.passes === false || ingress.passes === false
      ? 'denied'
      : egress.passes === undefined || ingress.passes === undefined
        ? 'undecided'
        : 'allowed';
  return {
    verdict,
    flow: first.flow,
    from: first.from,
    to: first.to,
    egress,
    ingress,
    agents: replies.map(({ agent, answer, error }) =>
      answer
        ? { agent, node: answer.node, appliedAt: answer.appliedAt, ...(answer.writeFailures ? { writeFailures: answer.writeFailures } : {}) }
        : { agent, error: error ?? '' },
    ),
  };
}

/** The human-readable form: one line for the flow and its verdict, one per direction, then agents that failed. */
export function formatExplanation(merged: MergedExplanation): string {
  const side = (endpoint: ExplainEndpoint) =>
    endpoint.pod === undefined ? endpoint.ip : `${endpoint.pod} (${endpoint.ip}${endpoint.node === undefined ? '' : `, node ${endpoint.node}`})`;
  const { flow } = merged;
  const verdict = merged.verdict === 'partly' ? 'PARTLY ALLOWED' : merged.verdict.toUpperCase();
  const lines = [`${side(merged.from)} -> ${side(merged.to)} ${flow.protocol}/${flow.port}: ${verdict}`];
  if (merged.service) {
    lines.push(...describeService(merged.service));
  } else {
    for (const which of ['egress', 'ingress'] as const) {
      const direction = merged[which];
      const pod = which === 'egress' ? merged.from.pod : merged.to.pod;
      const by = direction.decidedBy ? ` (decided on ${direction.decidedBy.node})` : '';
      lines.push(`  ${which.padEnd(7)}${by}: ${describeDirection(which, pod, direction)}`);
    }
  }
  for (const agent of merged.agents) {
    if (agent.error !== undefined) lines.push(`  agent ${agent.agent} did not answer: ${agent.error}`);
    if (agent.writeFailures) {
      lines.push(`  warning: the last sync on ${agent.node ?? agent.agent} could not write ${agent.writeFailures.join(', ')}: its kernel may differ`);
    }
  }
  return `${lines.join('\n')}\n`;
}

function describeDirection(which: 'egress' | 'ingress', pod: string | undefined, direction: MergedDirection): string {
  const policies = direction.policies ?? [];
  const isolating = `isolated by ${policies.join(', ')}`;
  switch (direction.verdict) {
    case undefined:
      return direction.note ?? 'not decided';
    case 'not-local':
      return 'not decided';
    case 'not-isolated':
      return `allowed: no network policy selects ${pod ?? 'it'} for ${which}`;
    case 'allowed': {
      const rule = direction.rule;
      return rule ? `allowed by ${rule.policy} spec.${rule.direction}[${rule.index}]; ${isolating}` : `allowed; ${isolating}`;
    }
    case 'denied':
      return policies.length === 0
        ? `DENIED: no network policy selects ${pod ?? 'it'} and unselected pods are isolated`
        : `DENIED: no rule allows it; ${isolating}`;
    case 'fail-closed':
      return `DENIED (fail closed): ${(direction.failedPolicies ?? []).join(', ') || 'a policy'} could not be compiled or programmed; ${isolating}`;
    case 'default-deny':
      return `DENIED (default deny): ${pod ?? 'this address'} is in the node's pod CIDRs but was not yet a pod at the last sync, so it has no rules`;
  }
}

/** The Service's lines: its path, each endpoint with its verdict, then where the client's connections went. */
function describeService({ node, path, endpoints }: ServiceExplanation): string[] {
  const address = (a: { address: string; port: number }) => (a.address.includes(':') ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`);
  const lines = [`  service ${path.service}${path.portName ? ` port ${path.portName}` : ''} (${path.kind}), on ${node}: ${path.via}`];
  if (endpoints.length === 0) lines.push('    no endpoints: nothing answers this Service');
  for (const { endpoint, explanation } of endpoints) {
    const weight = endpoint.weight === 0 ? ' (draining)' : '';
    if (typeof explanation === 'string') {
      lines.push(`    endpoint ${address(endpoint)}${weight}: no answer: ${explanation.split('\n')[0]}`);
      continue;
    }
    const pod = explanation.to.pod === undefined ? '' : ` ${explanation.to.pod}`;
    const blocking = (['egress', 'ingress'] as const).find((which) => explanation[which].passes === false);
    const why = blocking
      ? describeDirection(blocking, blocking === 'egress' ? explanation.from.pod : explanation.to.pod, explanation[blocking])
      : describeDirection('ingress', explanation.to.pod, explanation.ingress);
    lines.push(`    endpoint ${address(endpoint)}${pod}${weight}: ${why}`);
  }
  for (const connection of path.connections) {
    const template = connection.client.port === 0 ? ' (ClientIP affinity)' : '';
    lines.push(`    connection ${address(connection.client)} went to ${address(connection.endpoint)} (${connection.state})${template}`);
  }
  return lines;
}
