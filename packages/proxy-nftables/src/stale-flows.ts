import type { IpFamily } from '@kube-router/netfilter';
import type { ServicePortPlan } from './model.js';

/** One `conntrack -D` to run: UDP flows to a Service address (and port) that still point at a gone endpoint. */
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

/**
 * The UDP conntrack entries to delete after a write, as kube-proxy's conntrack.CleanStaleEntries finds them: for each
 * endpoint no longer reachable, the flows from every Service address and the NodePort to it; for a Service port that had
 * no endpoint and now has one, every flow to its addresses (they were refused, and a client that keeps sending from one
 * port would keep hitting that entry instead of reaching the new endpoint). TCP needs none: its connections end.
 */
export function staleFlows(before: readonly ServicePortPlan[], after: readonly ServicePortPlan[]): StaleFlow[] {
  const now = new Map(after.map((plan) => [portKey(plan), plan]));
  const flows: StaleFlow[] = [];
  const seen = new Set<string>();
  const add = (flow: StaleFlow) => {
    const key = `${flow.family}|${flow.originalDestination ?? '*'}|${flow.originalPort}|${flow.replySource ?? '*'}`;
    if (seen.has(key)) return;
    seen.add(key);
    flows.push(flow);
  };
  const addresses = (plan: ServicePortPlan) => [plan.clusterIp, ...plan.externalIps, ...plan.loadBalancerIps];
  for (const old of before) {
    if (old.protocol !== 'udp') continue;
    const current = now.get(portKey(old));
    if (current === old) continue; // unchanged (the model reuses an unchanged Service's plans)
    const reachable = new Set(current?.endpoints.allReachable.map((endpoint) => endpoint.address) ?? []);
    for (const endpoint of old.endpoints.allReachable) {
      if (reachable.has(endpoint.address)) continue;
      for (const address of addresses(old)) add({ family: old.family, originalDestination: address, originalPort: old.port, replySource: endpoint.address });
      if (old.nodePort !== 0) add({ family: old.family, originalDestination: undefined, originalPort: old.nodePort, replySource: endpoint.address });
    }
  }
  const previous = new Map(before.map((plan) => [portKey(plan), plan]));
  for (const plan of after) {
    if (plan.protocol !== 'udp' || plan.endpoints.allReachable.length === 0) continue;
    const old = previous.get(portKey(plan));
    if (old === plan) continue;
    if (old && old.endpoints.allReachable.length > 0) continue;
    if (!old) continue; // A new Service port: nothing was refused for it by this proxy.
    for (const address of addresses(plan)) add({ family: plan.family, originalDestination: address, originalPort: plan.port, replySource: undefined });
  }
  return flows;
}
