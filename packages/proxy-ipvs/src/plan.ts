import { ipvsDestinationId, ipvsRestoreLine, ipvsServiceId, ipvsServiceOptionsEqual } from '@kube-router/netfilter';
import type { IpvsDestination, IpvsDestinationConnections, IpvsServiceKey, IpvsVirtualServer } from '@kube-router/netfilter';
import type { DesiredVirtualServer } from './model.js';

/** A real server on its way out under graceful termination: weight 0 until drained or its deadline. */
export interface DrainingDestination {
  readonly service: IpvsServiceKey;
  readonly address: string;
  readonly port: number;
  /** Epoch milliseconds after which it is deleted whatever its connections. */
  readonly deadline: number;
}

export interface PlanContext {
  /** Kernel services at these addresses are never deleted (--excluded-cidrs). */
  readonly isExcluded: (address: string) => boolean;
  /** 0 disables graceful termination: removed real servers are deleted at once. */
  readonly gracefulPeriodMs: number;
  readonly now: number;
  /** Real servers draining from earlier syncs, by drainKey. */
  readonly draining: ReadonlyMap<string, DrainingDestination>;
  /** Connection counts, read only when something drains; missing means "not known", which keeps it draining. */
  readonly connections?: ReadonlyMap<string, IpvsDestinationConnections>;
}

/**
 * UDP flows that conntrack may still hold for an IPVS service after the plan applies: to one real server that goes
 * (`endpoint`), or to the whole virtual address and port (a service that gets its first real server, or goes).
 */
export interface StaleFlows {
  readonly service: IpvsServiceKey;
  readonly endpoint?: { readonly address: string; readonly port: number };
}

export interface IpvsPlan {
  /** The restore lines of each desired virtual service that needs any, by its id. */
  readonly byService: ReadonlyMap<string, readonly string[]>;
  /** Deletions of virtual services nobody wants. */
  readonly deletions: readonly string[];
  /** What drains after this plan is applied. */
  readonly draining: ReadonlyMap<string, DrainingDestination>;
  /** Conntrack entries to delete once the plan has applied (UDP only: TCP and SCTP end or reset on their own). */
  readonly staleFlows: readonly StaleFlows[];
}

export function drainKey(service: IpvsServiceKey, destination: { address: string; port: number }): string {
  return `${ipvsServiceId(service)}>${ipvsDestinationId(destination)}`;
}

/**
 * The fewest ipvsadm operations that turn the kernel's state into the desired one: nothing for what matches, `-E` for
 * a changed scheduler or persistence, `-a`/`-e`/`-d` per real server. One endpoint change is one operation.
 */
export function planIpvs(
  current: readonly IpvsVirtualServer[],
  desired: ReadonlyMap<string, DesiredVirtualServer>,
  context: PlanContext,
): IpvsPlan {
  const currentById = new Map(current.map((server) => [ipvsServiceId(server.service), server]));
  const byService = new Map<string, string[]>();
  const draining = new Map<string, DrainingDestination>();
  const staleFlows: StaleFlows[] = [];

  for (const [id, want] of desired) {
    const have = currentById.get(id);
    const lines: string[] = [];
    // A UDP client that kept sending while the service had no real server (or none that takes new flows) holds an
    // entry that leads nowhere; kube-proxy deletes them when the service gets its first endpoint.
    const hadNone = !have || !have.destinations.some((destination) => destination.weight > 0);
    if (want.service.protocol === 'udp' && hadNone && want.destinations.length > 0) staleFlows.push({ service: want.service });
    if (!have) {
      lines.push(ipvsRestoreLine.addService(want.service));
      for (const destination of want.destinations) lines.push(ipvsRestoreLine.addDestination(want.service, destination));
    } else {
      if (!ipvsServiceOptionsEqual(have.service, want.service)) lines.push(ipvsRestoreLine.editService(want.service));
      const haveDestinations = new Map(have.destinations.map((d) => [ipvsDestinationId(d), d]));
      const wanted = new Set<string>();
      for (const destination of want.destinations) {
        const key = ipvsDestinationId(destination);
        wanted.add(key);
        const existing = haveDestinations.get(key);
        if (!existing) lines.push(ipvsRestoreLine.addDestination(want.service, destination));
        else if (!sameDestination(existing, destination)) lines.push(ipvsRestoreLine.editDestination(want.service, destination));
      }
      for (const [key, existing] of haveDestinations) {
        if (wanted.has(key)) continue;
        const retired = retire(want.service, existing, context, draining);
        lines.push(...retired);
        if (want.service.protocol === 'udp' && retired.some((line) => line.startsWith('-d '))) {
          staleFlows.push({ service: want.service, endpoint: { address: existing.address, port: existing.port } });
        }
      }
    }
    if (lines.length > 0) byService.set(id, lines);
  }

  const deletions: string[] = [];
  for (const [id, have] of currentById) {
    if (desired.has(id) || context.isExcluded(have.service.address)) continue;
    deletions.push(ipvsRestoreLine.deleteService(have.service));
    if (have.service.protocol === 'udp') staleFlows.push({ service: have.service });
  }
  return { byService, deletions, draining, staleFlows };
}

/** A real server that is no longer wanted: deleted, or set to weight 0 and kept until drained. */
function retire(
  service: IpvsServiceKey,
  existing: IpvsDestination,
  context: PlanContext,
  draining: Map<string, DrainingDestination>,
): string[] {
  if (context.gracefulPeriodMs <= 0) return [ipvsRestoreLine.deleteDestination(service, existing)];
  const key = drainKey(service, existing);
  // Adopted after a restart (weight 0 already, unknown deadline): a fresh period starts.
  const entry = context.draining.get(key) ?? { service, address: existing.address, port: existing.port, deadline: context.now + context.gracefulPeriodMs };
  const connections = context.connections?.get(key);
  const drained = connections !== undefined && connections.activeConnections + connections.inactiveConnections === 0;
  if (existing.weight === 0 && (drained || context.now >= entry.deadline)) return [ipvsRestoreLine.deleteDestination(service, existing)];
  draining.set(key, entry);
  return existing.weight === 0 ? [] : [ipvsRestoreLine.editDestination(service, { ...existing, weight: 0 })];
}

function sameDestination(a: IpvsDestination, b: IpvsDestination): boolean {
  return a.weight === b.weight && a.forwarding === b.forwarding;
}
