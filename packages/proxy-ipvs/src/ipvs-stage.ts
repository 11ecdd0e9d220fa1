import type { SyncFailures } from '@kube-router/controller';
import { ipvsAddressFamily, ipvsServiceId } from '@kube-router/netfilter';
import type { ConntrackFilter, IpvsDestinationConnections, Ipvsadm, IpvsVirtualServer } from '@kube-router/netfilter';
import type { DesiredVirtualServer, ProxyModel } from './model.js';
import { drainKey, planIpvs } from './plan.js';
import type { DrainingDestination, IpvsPlan, StaleFlows } from './plan.js';
import type { SyncWarnings } from '@kube-router/controller';

/** What one sync did to IPVS. */
export interface IpvsApplied {
  /** ipvsadm operations issued (restore lines), retries of refused services included. */
  readonly operations: number;
  /** Where the sync took the kernel's state from: `ipvsadm -Sn`, or the plugin's record of what it last applied. */
  readonly stateFrom: 'kernel' | 'model';
  readonly saveMs: number;
  readonly restoreMs: number;
  /** IPVS services in the kernel after the sync. */
  readonly virtualServers: number;
  /**
   * What this sync found gone from the kernel though the last sync had put it there and it is still wanted the same:
   * removed behind the agent's back (`ipvsadm -D`, `-d`), and put back by this sync.
   */
  readonly drift: { readonly services: readonly string[]; readonly destinations: readonly string[] };
  /** UDP conntrack entries deleted (flows to real servers that went, or to services that got their first). */
  readonly conntrackDeleted: number;
}

export interface IpvsStageOptions {
  /** Kernel services at these addresses are never deleted (--excluded-cidrs). */
  readonly isExcluded: (address: string) => boolean;
  /** 0 disables graceful termination. */
  readonly gracefulPeriodMs: number;
  /** Deletes the conntrack entries a filter names, resolving with how many; absent, stale flows are left alone. */
  readonly deleteConntrack?: (filter: ConntrackFilter) => Promise<number>;
}

/** conntrack walks the whole table per delete: a few at once keep a burst (a node's first sync) short without a flood. */
const CONNTRACK_CONCURRENCY = 4;

/**
 * The IPVS virtual and real servers: the kernel's state, the plan of the fewest operations, one restore batch; lines
 * the kernel refused are retried per Service to fail that Service alone. Real servers under graceful termination drain
 * from one sync to the next. A full sync reads the state with `ipvsadm -Sn` and repairs drift; an event sync after a
 * clean apply plans from what that apply left instead, so that one endpoint change costs the same at 10,000 Services
 * as at 100 (listing every service was most of its cost). What the kernel refuses then sends it back to the real state.
 */
export class IpvsStage {
  readonly #ipvs: Ipvsadm;
  readonly #options: IpvsStageOptions;
  #draining: ReadonlyMap<string, DrainingDestination> = new Map();
  /**
   * Our virtual servers as the last apply left them in the kernel (without a Service the kernel refused, whose state
   * is unknown), and how many services the kernel held then; undefined before the first apply and while an apply is
   * under way, so that one that throws halfway leaves no record to trust.
   */
  #applied: { readonly servers: ReadonlyMap<string, DesiredVirtualServer>; readonly kernelServices: number } | undefined;
  /** Stale flows whose deletion failed, by staleFlowsKey: tried again at the next sync. */
  #staleFlowsPending = new Map<string, StaleFlows>();

  constructor(ipvs: Ipvsadm, options: IpvsStageOptions) {
    this.#ipvs = ipvs;
    this.#options = options;
  }

  /** How many real servers drain after the last sync. */
  get draining(): number {
    return this.#draining.size;
  }

  async apply(model: ProxyModel, failures: SyncFailures, warnings: SyncWarnings, { full }: { readonly full: boolean }): Promise<IpvsApplied> {
    // Draining real servers are weighed by their connections, read from the kernel anyway: then the kernel's state too.
    const record = !full && this.#draining.size === 0 ? this.#applied : undefined;
    const saveStarted = performance.now();
    const read = record ? undefined : await this.#ipvs.save();
    const saveMs = record ? 0 : performance.now() - saveStarted;
    // From the record, only what changed is planned: the model keeps an unchanged Service's virtual servers as the
    // same objects (its cache), so one endpoint change plans one service, not every service of the cluster.
    const { state, desired } = read ? { state: read, desired: model.virtualServers } : changedSince(record!.servers, model.virtualServers);
    const known = read ? new Map(read.map((server) => [ipvsServiceId(server.service), server])) : record!.servers;
    // Drift is what a read of the kernel finds (the record of the last apply has none), against what the last apply left.
    const drift = read ? this.#driftIn(read, model) : { services: [], destinations: [] };
    const planFrom = await this.#planner();
    const plan = planFrom(state, desired);
    this.#applied = undefined;
    const restored = await this.#ipvs.restore([...plan.deletions, ...[...plan.byService.values()].flat()]);
    let operations = restored.lines;
    let restoreMs = restored.durationMs;
    let refused: ReadonlySet<string> = new Set();
    if (restored.stderr) {
      // The retry reads the kernel and plans every Service: a partial plan would take the others for unwanted.
      const retried = await this.#retryRefused((current) => planFrom(current, model.virtualServers), model, restored.stderr, failures, warnings);
      operations += retried.operations;
      restoreMs += retried.restoreMs;
      refused = retried.refused;
    }
    this.#draining = plan.draining;
    let added = 0;
    for (const id of desired.keys()) if (!known.has(id)) added++;
    const virtualServers = (record?.kernelServices ?? known.size) - plan.deletions.length + added;
    // After a refusal the retry has put every other Service as wanted: a refused one stays out of the record, so that
    // an event sync plans it from scratch (and the kernel refuses it again, alone) rather than from a guess.
    const servers = refused.size === 0 ? model.virtualServers : new Map([...model.virtualServers].filter(([id]) => !refused.has(id)));
    this.#applied = { servers, kernelServices: virtualServers };
    const conntrackDeleted = await this.#deleteStaleFlows(plan.staleFlows, failures);
    return { operations, stateFrom: record ? 'model' : 'kernel', saveMs, restoreMs, virtualServers, drift, conntrackDeleted };
  }

  /**
   * Deletes the UDP conntrack entries of the plan (and those an earlier sync failed to delete) once IPVS has changed:
   * deleted before, a client's next packet would make the entry again towards the old real server. Each failure is
   * joined on its own and kept for the next sync; one never stops the others.
   */
  async #deleteStaleFlows(planned: readonly StaleFlows[], failures: SyncFailures): Promise<number> {
    const deleteConntrack = this.#options.deleteConntrack;
    if (!deleteConntrack) return 0;
    const todo = new Map(this.#staleFlowsPending);
    for (const flows of planned) todo.set(staleFlowsKey(flows), flows);
    this.#staleFlowsPending = new Map();
    const queue = [...todo];
    let deleted = 0;
    const worker = async () => {
      for (let next = queue.shift(); next; next = queue.shift()) {
        const [key, flows] = next;
        const filter: ConntrackFilter = {
          protocol: 'udp',
          family: ipvsAddressFamily(flows.service.address),
          originalDestination: flows.service.address,
          originalPort: flows.service.port,
          ...(flows.endpoint && { replySource: flows.endpoint.address, replySourcePort: flows.endpoint.port }),
        };
        const count = await failures.attempt(`conntrack/${key}`, () => deleteConntrack(filter));
        if (count === undefined) this.#staleFlowsPending.set(key, flows);
        else deleted += count;
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONNTRACK_CONCURRENCY, queue.length) }, worker));
    return deleted;
  }

  /**
   * The wanted services and real servers that the last apply left in place (its record: no refused Service, none after
   * an apply that threw) and the kernel no longer has.
   */
  #driftIn(current: readonly IpvsVirtualServer[], model: ProxyModel): IpvsApplied['drift'] {
    if (!this.#applied) return { services: [], destinations: [] };
    const inPlace = wantedObjects(this.#applied.servers);
    const wanted = wantedObjects(model.virtualServers);
    const found = wantedObjects(new Map(current.map((server) => [ipvsServiceId(server.service), server])));
    return {
      services: [...inPlace.services].filter((id) => wanted.services.has(id) && !found.services.has(id)),
      // A real server of a service that is gone is counted with its service.
      destinations: [...inPlace.destinations].filter(
        (key) => wanted.destinations.has(key) && !found.destinations.has(key) && found.services.has(key.slice(0, key.indexOf('>'))),
      ),
    };
  }

  /** Plans from a state to what is wanted; the connection counts of the real servers are read while any drains. */
  async #planner(): Promise<(state: readonly IpvsVirtualServer[], desired: ReadonlyMap<string, DesiredVirtualServer>) => IpvsPlan> {
    let connections: Map<string, IpvsDestinationConnections> | undefined;
    if (this.#draining.size > 0) {
      connections = new Map((await this.#ipvs.connections()).map((entry) => [drainKey(entry.service, entry), entry]));
    }
    const context = {
      isExcluded: this.#options.isExcluded,
      gracefulPeriodMs: this.#options.gracefulPeriodMs,
      now: Date.now(),
      draining: this.#draining,
      ...(connections !== undefined && { connections }),
    };
    return (state, desired) => planIpvs(state, desired, context);
  }

  /**
   * ipvsadm went on past the lines the kernel refused without saying which: the state says. Alone, each Service's
   * lines get the kernel's message for this Service only (or apply, if the refusal was transient).
   */
  async #retryRefused(
    planOf: (state: readonly IpvsVirtualServer[]) => IpvsPlan,
    model: ProxyModel,
    stderr: string,
    failures: SyncFailures,
    warnings: SyncWarnings,
  ): Promise<{ operations: number; restoreMs: number; refused: ReadonlySet<string> }> {
    let operations = 0;
    let restoreMs = 0;
    const refused = new Set<string>();
    const leftover = planOf(await this.#ipvs.save());
    for (const [id, serviceLines] of leftover.byService) {
      const owner = model.virtualServers.get(id)?.owner ?? id;
      const retry = await this.#ipvs.restore(serviceLines);
      operations += retry.lines;
      restoreMs += retry.durationMs;
      if (!retry.stderr) continue;
      refused.add(id);
      const error = new Error(`IPVS refused ${id}: ${retry.stderr}`);
      failures.add(`service/${owner}`, error);
      warnings.warn(owner, 'IpvsServiceNotProgrammed', error.message);
    }
    for (const line of leftover.deletions) failures.add(`ipvs-cleanup/${line}`, new Error(`IPVS refused "${line}": ${stderr}`));
    return { operations, restoreMs, refused };
  }
}

/** `udp/10.96.0.10/53` for the whole service, `udp/10.96.0.10/53>10.244.1.5:53` for one real server's flows. */
function staleFlowsKey(flows: StaleFlows): string {
  return flows.endpoint ? drainKey(flows.service, flows.endpoint) : ipvsServiceId(flows.service);
}

/** Service ids and real server keys (drainKey) of a set of virtual servers. */
interface IpvsObjects {
  readonly services: ReadonlySet<string>;
  readonly destinations: ReadonlySet<string>;
}

function wantedObjects(virtualServers: ReadonlyMap<string, IpvsVirtualServer>): IpvsObjects {
  const services = new Set<string>();
  const destinations = new Set<string>();
  for (const [id, server] of virtualServers) {
    services.add(id);
    for (const destination of server.destinations) destinations.add(drainKey(server.service, destination));
  }
  return { services, destinations };
}

/**
 * What an event sync plans from the record of the last apply: the virtual servers whose wanted object is not the one
 * applied (new or changed), and the applied ones no longer wanted (to delete), each with what the record says the
 * kernel has of it.
 */
function changedSince(
  applied: ReadonlyMap<string, DesiredVirtualServer>,
  wanted: ReadonlyMap<string, DesiredVirtualServer>,
): { state: IpvsVirtualServer[]; desired: Map<string, DesiredVirtualServer> } {
  const state: IpvsVirtualServer[] = [];
  const desired = new Map<string, DesiredVirtualServer>();
  for (const [id, want] of wanted) {
    const had = applied.get(id);
    if (had === want) continue;
    desired.set(id, want);
    if (had) state.push(had);
  }
  for (const [id, had] of applied) if (!wanted.has(id)) state.push(had);
  return { state, desired };
}
