import type { ServiceFlow, ServicePath } from '@kube-router/controller';
import { canonicalIpvsAddress, ipvsServiceId } from '@kube-router/netfilter';
import type { IpvsConnectionEntry, IpvsProtocol } from '@kube-router/netfilter';
import type { DesiredVirtualServer } from './model.js';

const PROTOCOLS: Record<ServiceFlow['protocol'], IpvsProtocol> = { TCP: 'tcp', UDP: 'udp', SCTP: 'sctp' };

/**
 * The path of a flow to a Service address, from the virtual servers the proxy last programmed and IPVS's connection
 * table: which Service and port it is, its real servers, and the real server each of the client's connections went
 * to (IPVS chooses per connection, so the table is the only place that knows). Undefined when no virtual server of
 * the proxy has that address, port and protocol.
 */
export function explainServicePath(
  desired: ReadonlyMap<string, DesiredVirtualServer>,
  table: readonly IpvsConnectionEntry[],
  flow: ServiceFlow,
): ServicePath | undefined {
  const server = virtualServerOf(desired, flow);
  if (!server) return undefined;
  const { protocol, address } = server.service;
  const source = flow.source === undefined ? undefined : canonicalAddress(flow.source);
  const { service } = server;
  const persistence = service.persistentSeconds === undefined ? '' : ` persistent ${service.persistentSeconds} s`;
  return {
    service: server.owner,
    portName: server.portName,
    kind: server.kind,
    via: `IPVS ${flow.protocol} ${address.includes(':') ? `[${address}]` : address}:${flow.port} ${service.scheduler}${persistence}`,
    endpoints: server.destinations.map((destination) => ({ address: destination.address, port: destination.port, weight: destination.weight })),
    connections: table
      .filter(
        (entry) =>
          entry.protocol === protocol &&
          entry.virtual.address === address &&
          entry.virtual.port === flow.port &&
          (source === undefined || entry.client.address === source),
      )
      .map((entry) => ({ client: entry.client, endpoint: entry.destination, state: entry.state })),
  };
}

/** The virtual server the proxy programmed for the flow's destination, port and protocol; undefined when none. */
export function virtualServerOf(desired: ReadonlyMap<string, DesiredVirtualServer>, flow: ServiceFlow): DesiredVirtualServer | undefined {
  return desired.get(ipvsServiceId({ protocol: PROTOCOLS[flow.protocol], address: canonicalAddress(flow.destination), port: flow.port }));
}

function canonicalAddress(text: string): string {
  try {
    return canonicalIpvsAddress(text);
  } catch {
    throw new RangeError(`${JSON.stringify(text)} is not an IP address`);
  }
}
