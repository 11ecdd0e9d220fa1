import type { ServiceFlow, ServicePath } from '@kube-router/controller';
import { parseIp } from '@kube-router/kube';
import type { ServiceEndpoint } from '@kube-router/kube';
import type { ConntrackEntry } from '@kube-router/netfilter';
import type { ProxyModel, ServicePortPlan } from './model.js';
import { TABLES } from './names.js';

/** Where a flow's destination sits for its Service port: what kube-router explain calls the path's kind. */
export type ServiceAddressKind = 'cluster-ip' | 'node-port' | 'external-ip' | 'load-balancer';

export interface MatchedServicePort {
  readonly plan: ServicePortPlan;
  readonly kind: ServiceAddressKind;
}

/**
 * The Service port the proxy last programmed for a flow's destination, port and protocol, and what the address is to
 * it; undefined when none of its Services has it. With `nodePortBindOnAllIp` every address is a NodePort's.
 */
export function servicePortOf(model: ProxyModel, flow: ServiceFlow, nodePortBindOnAllIp: boolean): MatchedServicePort | undefined {
  const destination = parseIp(flow.destination);
  if (!destination) throw new RangeError(`${JSON.stringify(flow.destination)} is not an IP address`);
  const protocol = flow.protocol.toLowerCase();
  const address = destination.text;
  const nodePortHere = nodePortBindOnAllIp || model.nodePortAddresses[destination.family].includes(address);
  for (const plan of model.ports[destination.family]) {
    if (plan.protocol !== protocol) continue;
    if (plan.port === flow.port) {
      if (plan.clusterIp === address) return { plan, kind: 'cluster-ip' };
      if (plan.externalIps.includes(address)) return { plan, kind: 'external-ip' };
      if (plan.loadBalancerIps.includes(address)) return { plan, kind: 'load-balancer' };
    }
    if (plan.nodePort !== 0 && plan.nodePort === flow.port && nodePortHere) return { plan, kind: 'node-port' };
  }
  return undefined;
}

/**
 * The path of a flow to a Service address, from the model the proxy last programmed and the kernel's connection
 * tracking: which Service and port, the endpoints its traffic policy leaves this node, and the endpoint each of the
 * client's connections was DNATed to (nftables picks per connection at random, so conntrack is the only place that
 * knows).
 */
export function explainServicePath(matched: MatchedServicePort, entries: readonly ConntrackEntry[], flow: ServiceFlow): ServicePath {
  const { plan, kind } = matched;
  const local = kind === 'cluster-ip' ? plan.internalLocal : plan.externalLocal;
  const endpoints: readonly ServiceEndpoint[] = local ? plan.endpoints.local : plan.endpoints.cluster;
  const source = flow.source === undefined ? undefined : parseIp(flow.source)?.text;
  const table = TABLES[plan.family];
  const destination = parseIp(flow.destination)?.text ?? flow.destination;
  const affinity = plan.affinitySeconds === undefined ? '' : ` affinity ${plan.affinitySeconds} s`;
  return {
    service: plan.owner,
    portName: plan.portName,
    kind,
    via: `nftables ${table.family} ${table.name} ${flow.protocol} ${destination.includes(':') ? `[${destination}]` : destination}:${flow.port} random${affinity}${local ? ' local endpoints only' : ''}`,
    endpoints: endpoints.map((endpoint) => ({ address: endpoint.address, port: endpoint.port, weight: 1 })),
    connections: entries
      .filter((entry) => source === undefined || parseIp(entry.original.source)?.text === source)
      .map((entry) => ({
        client: { address: entry.original.source, port: entry.original.sourcePort },
        endpoint: { address: entry.reply.source, port: entry.reply.sourcePort },
        state: entry.state,
      })),
  };
}
