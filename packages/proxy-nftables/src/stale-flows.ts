import type { IpFamily } from '@kube-router/netfilter';
import type { ServicePortPlan } from './model.js';

/** One `conntrack -D` to run: UDP flows to a Service address (and port) that still point at an endpoint not serving. */
export interface StaleFlow {
  readonly family: IpFamily;
  /** The address the client sent to; undefined for a NodePort (any node address). */
  readonly originalDestination: string | undefined;
  readonly originalPort: number;
  /** The endpoint the flows were sent to; undefined: every flow to the address (a Service that got its first endpoint). */
  readonly replySource: string | undefined;
}

function portKey(plan: ServicePortPlan): string {
  return `${plan.family}|${plan.owner}|${plan.protocol}|${plan.portName}`;
}

/** Identifies a stale flow, to deduplicate and to keep the failed ones for the next sync. */
export function staleFlowKey(flow: StaleFlow): string {
  return `${flow.family}|${flow.originalDestination ?? '*'}|${flow.originalPort}|${flow.replySource ?? '*'}`;
}

const addressesOf = (plan: ServicePortPlan) => [plan.clusterIp, ...plan.externalIps, ...plan.loadBalancerIps];

/**
 * The UDP conntrack entries to delete after a write, as kube-proxy's conntrack cleanup finds them: for each endpoint
 * of a Service port that no longer serves it (gone, or not serving), the flows from every Service address and the
 * NodePort to it. An endpoint still serving keeps its flows whatever the traffic policies, topology or terminating
 * status say (they are only about new flows). For a Service port that had no endpoint and now has one, every flow to
 * its addresses and NodePort goes (they were refused, and a client that keeps sending from one port would keep hitting
 * that entry instead of reaching the new endpoint). TCP needs none: its connections end.
 */
export function staleFlows(before: readonly ServicePortPlan[], after: readonly ServicePortPlan[]): StaleFlow[] {
  const now = new Map(after.map((plan) => [portKey(plan), plan]));
  const flows: StaleFlow[] = [];
  const seen = new Set<string>();
  const add = (flow: StaleFlow) => {
    const key = staleFlowKey(flow);
    if (seen.has(key)) return;
    seen.add(key);
    flows.push(flow);
  };
  for (const old of before) {
    if (old.protocol !== 'udp') continue;
    const current = now.get(portKey(old));
    if (current === old) continue; // unchanged (the model reuses an unchanged Service's plans)
    const serving = new Set(current?.servingAddresses ?? []);
    // What flows may point at: the serving endpoints then, and whatever the proxy sent traffic to.
    const then = new Set([...old.servingAddresses, ...old.endpoints.allReachable.map((endpoint) => endpoint.address)]);
    for (const endpoint of then) {
      if (serving.has(endpoint)) continue;
      for (const address of addressesOf(old)) add({ family: old.family, originalDestination: address, originalPort: old.port, replySource: endpoint });
      if (old.nodePort !== 0) add({ family: old.family, originalDestination: undefined, originalPort: old.nodePort, replySource: endpoint });
    }
  }
  const previous = new Map(before.map((plan) => [portKey(plan), plan]));
  for (const plan of after) {
    if (plan.protocol !== 'udp' || plan.endpoints.allReachable.length === 0) continue;
    const old = previous.get(portKey(plan));
    if (old === plan) continue;
    if (old && old.endpoints.allReachable.length > 0) continue;
    if (!old) continue; // A new Service port: nothing was refused for it by this proxy.
    for (const address of addressesOf(plan)) add({ family: plan.family, originalDestination: address, originalPort: plan.port, replySource: undefined });
    if (plan.nodePort !== 0) add({ family: plan.family, originalDestination: undefined, originalPort: plan.nodePort, replySource: undefined });
  }
  return flows;
}

/**
 * Whether a flow that failed to be deleted is still to delete now: not when its endpoint serves again a Service port
 * reached by the same address and port.
 */
export function stillStale(flow: StaleFlow, after: readonly ServicePortPlan[]): boolean {
  if (flow.replySource === undefined) return true;
  return !after.some(
    (plan) =>
      plan.family === flow.family &&
      plan.protocol === 'udp' &&
      (flow.originalDestination === undefined ? plan.nodePort === flow.originalPort : plan.port === flow.originalPort && addressesOf(plan).includes(flow.originalDestination)) &&
      plan.servingAddresses.includes(flow.replySource as string),
  );
}
