import { networkInterfaces } from 'node:os';
import { defineServiceKey } from '@kube-router/controller';
import { parseIp } from '../cidr.js';
import type { ParsedIp } from '../cidr.js';
import { explainFlow, FlowInputError } from '../explain.js';
import type { Flow, FlowExplanation } from '../explain.js';
import type { IpFamily, PolicyModel, Protocol } from '../model.js';
import { actionablePodsByIp, podIps } from '../pods.js';
import type { PodLike } from '../types.js';
import type { NetpolSources } from './sources.js';

/** A flow as an operator writes it: each side a pod (`namespace/name`) or an IP address. */
export interface ExplainRequest {
  readonly from: string;
  readonly to: string;
  /** The destination port, 1-65535 (a query string's text is accepted). */
  readonly port: number | string | undefined;
  /** TCP (the default), UDP or SCTP, in any case. */
  readonly protocol?: string | undefined;
}

/** One side of the flow as resolved: the address used, and the pod that has it when one does. */
export interface ExplainEndpoint {
  /** What the request said. */
  readonly input: string;
  readonly ip: string;
  /** `namespace/name` of the pod with this address, if any pod of the cluster has it. */
  readonly pod?: string;
  /** That pod's node (spec.nodeName): the agent there decides this side. */
  readonly node?: string;
}

export interface ExplainAnswer {
  /** The node whose agent answers: it decides egress of its own pods and ingress to them. */
  readonly node: string;
  /** When the model explained was applied (ISO 8601). */
  readonly appliedAt: string;
  /** Present when that sync failed to write part of the node's rules: the kernel may not be what is explained. */
  readonly writeFailures?: readonly string[];
  readonly flow: Flow;
  readonly from: ExplainEndpoint;
  readonly to: ExplainEndpoint;
  readonly explanation: FlowExplanation;
}

/** An answer, or why there is none: `400` the request is wrong, `503` nothing has been applied yet. */
export type ExplainResult =
  | { readonly ok: true; readonly answer: ExplainAnswer }
  | { readonly ok: false; readonly status: 400 | 503; readonly error: string };

/** What the netpol controller provides: its verdict on a flow, from the model it last applied. */
export interface NetpolExplainService {
  explain(request: ExplainRequest): ExplainResult;
}

/** The key under which the netpol controller (either backend) provides its explain service. */
export const netpolExplainServiceKey = defineServiceKey<NetpolExplainService>('netpol-explain');

/** What the controller applied last: the model and the policies the kernel refused. */
export interface AppliedModel {
  readonly model: PolicyModel;
  readonly failedPolicies: ReadonlySet<string>;
  readonly appliedAt: Date;
  /** What the sync could not write of the node's part (`node/ipv4`, ...): the kernel may differ from the model there. */
  readonly writeFailures?: readonly string[];
  /** Present when the sync wrote --netpol-default-deny's tail chain: this node's pod CIDRs it guarded. */
  readonly defaultDeny?: { readonly podCidrs: readonly string[] };
}

/**
 * Whether an address is one of this host's own (what the tail chain's `fib type local` / `addrtype LOCAL` exempts);
 * the agent runs in the node's network namespace.
 */
export function isHostAddress(ip: string): boolean {
  const canonical = parseIp(ip)?.text;
  return Object.values(networkInterfaces()).some((addresses) => addresses?.some((address) => parseIp(address.address)?.text === canonical) ?? false);
}

/** The explain service over the controller's sources (every pod of the cluster, to resolve names) and last model. */
export function createExplainService(
  nodeName: string,
  sources: Pick<NetpolSources, 'pods'>,
  options: { readonly isolateUnselectedPods?: boolean | undefined },
  applied: () => AppliedModel | undefined,
  isNodeAddress: (ip: string) => boolean = isHostAddress,
): NetpolExplainService {
  return {
    explain(request) {
      const last = applied();
      if (!last) return { ok: false, status: 503, error: `netpol on ${nodeName} has not applied a sync yet` };
      try {
        const flow = resolveFlow(request, sources.pods());
        const explanation = explainFlow(last.model, flow.flow, last.failedPolicies, {
          isolateUnselectedPods: options.isolateUnselectedPods ?? false,
          ...(last.defaultDeny ? { defaultDeny: { podCidrs: last.defaultDeny.podCidrs, isNodeAddress } } : {}),
        });
        return {
          ok: true,
          answer: {
            node: nodeName,
            appliedAt: last.appliedAt.toISOString(),
            ...(last.writeFailures?.length ? { writeFailures: last.writeFailures } : {}),
            ...flow,
            explanation,
          },
        };
      } catch (error) {
        if (error instanceof FlowInputError) return { ok: false, status: 400, error: error.message };
        throw error;
      }
    },
  };
}

interface Side {
  readonly input: string;
  /** The candidate addresses: one for an IP, the pod's for a pod. */
  readonly ips: readonly ParsedIp[];
  readonly pod?: PodLike;
}

function resolveFlow(request: ExplainRequest, pods: readonly PodLike[]): { flow: Flow; from: ExplainEndpoint; to: ExplainEndpoint } {
  const protocol = parseProtocol(request.protocol);
  const port = parsePort(request.port);
  const from = resolveSide('from', request.from, pods);
  const to = resolveSide('to', request.to, pods);
  const family = (['ipv4', 'ipv6'] as const).find((f: IpFamily) => from.ips.some((ip) => ip.family === f) && to.ips.some((ip) => ip.family === f));
  if (!family) {
    throw new FlowInputError(`${from.input} (${texts(from)}) and ${to.input} (${texts(to)}) have no address family in common`);
  }
  const source = from.ips.find((ip) => ip.family === family) as ParsedIp;
  const destination = to.ips.find((ip) => ip.family === family) as ParsedIp;
  return {
    flow: { source: source.text, destination: destination.text, protocol, port },
    from: endpoint(from, source, pods),
    to: endpoint(to, destination, pods),
  };
}

function resolveSide(which: 'from' | 'to', input: unknown, pods: readonly PodLike[]): Side {
  if (typeof input !== 'string' || input === '') throw new FlowInputError(`${which} is missing: give a pod (namespace/name) or an IP`);
  const ip = parseIp(input);
  if (ip) return { input, ips: [ip] };
  const slash = input.indexOf('/');
  if (slash <= 0 || slash === input.length - 1 || input.indexOf('/', slash + 1) >= 0) {
    throw new FlowInputError(`${which} ${JSON.stringify(input)} is neither an IP address nor a pod as namespace/name`);
  }
  const namespace = input.slice(0, slash);
  const name = input.slice(slash + 1);
  const pod = pods.find((candidate) => candidate.metadata?.namespace === namespace && candidate.metadata.name === name);
  if (!pod) throw new FlowInputError(`${which}: no pod ${input} in the cluster`);
  const ips = podIps(pod);
  if (ips.length === 0) throw new FlowInputError(`${which}: pod ${input} has no IP address yet`);
  return { input, ips, pod };
}

function endpoint(side: Side, ip: ParsedIp, pods: readonly PodLike[]): ExplainEndpoint {
  // A named pod stays named (the user asked for it); an address names only a pod that holds it now.
  const pod = side.pod ?? actionablePodsByIp(pods).get(ip.text);
  const id = pod ? `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}` : undefined;
  const node = pod?.spec?.nodeName;
  return { input: side.input, ip: ip.text, ...(id === undefined ? {} : { pod: id }), ...(node === undefined ? {} : { node }) };
}

function parseProtocol(value: string | undefined): Protocol {
  if (value === undefined || value === '') return 'TCP';
  const upper = value.toUpperCase();
  if (upper === 'TCP' || upper === 'UDP' || upper === 'SCTP') return upper;
  throw new FlowInputError(`protocol ${JSON.stringify(value)} is not one of TCP, UDP, SCTP`);
}

function parsePort(value: number | string | undefined): number {
  if (value === undefined || value === '') throw new FlowInputError('a destination port is needed (1-65535)');
  const port = typeof value === 'number' ? value : /^\d{1,5}$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new FlowInputError(`port ${JSON.stringify(value)} is not an integer in 1-65535`);
  return port;
}

function texts(side: Side): string {
  return side.ips.map((ip) => ip.text).join(', ');
}
