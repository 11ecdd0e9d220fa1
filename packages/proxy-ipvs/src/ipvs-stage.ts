import type { SyncFailures } from '@kube-router/controller';
import { ipvsServiceId } from '@kube-router/netfilter';
import type { IpvsDestinationConnections, Ipvsadm, IpvsVirtualServer } from '@kube-router/netfilter';
import type { ProxyModel } from './model.js';
import { drainKey, planIpvs } from './plan.js';
import type { DrainingDestination, IpvsPlan } from './plan.js';
import type { SyncWarnings } from '@kube-router/controller';

/** What one sync did to IPVS. */
export interface IpvsApplied {
  /** ipvsadm operations issued (restore lines), retries of refused services included. */
  readonly operations: number;
  readonly saveMs: number;
  readonly restoreMs: number;
  /** IPVS services in the kernel after the sync. */
  readonly virtualServers: number;
  /**
   * What this sync found gone from the kernel though the last sync had put it there and it is still wanted the same:
   * removed behind the agent's back (`ipvsadm -D`, `-d`), and put back by this sync.
   */
  readonly drift: { readonly services: readonly string[]; readonly destinations: readonly string[] };
}

export interface IpvsStageOptions {
  /** Kernel services at these addresses are never deleted (--excluded-cidrs). */
  readonly isExcluded: (address: string) => boolean;
  /** 0 disables graceful termination. */
  readonly gracefulPeriodMs: number;
}

/**
 * The IPVS virtual and real servers: one read of the kernel's state, the plan of the fewest operations, one restore
 * batch; lines the kernel refused are retried per Service to fail that Service alone. Real servers under graceful
 * termination drain from one sync to the next.
 */
export class IpvsStage {
  readonly #ipvs: Ipvsadm;
  readonly #options: IpvsStageOptions;
  #draining: ReadonlyMap<string, DrainingDestination> = new Map();
  /** The services and real servers (drainKey) the last sync left in the kernel as wanted; empty until one applied cleanly. */
  #inPlace: IpvsObjects = { services: new Set(), destinations: new Set() };

  constructor(ipvs: Ipvsadm, options: IpvsStageOptions) {
    this.#ipvs = ipvs;
    this.#options = options;
  }

  /** How many real servers drain after the last sync. */
  get draining(): number {
    return this.#draining.size;
  }

  async apply(model: ProxyModel, failures: SyncFailures, warnings: SyncWarnings): Promise<IpvsApplied> {
    const saveStarted = performance.now();
    const current = await this.#ipvs.save();
    const saveMs = performance.now() - saveStarted;
    // The model's services and real servers, once a sync: what drift is looked for against, and what stays in place.
    const wanted = wantedObjects(model);
    const drift = this.#driftIn(current, wanted);
    const planOf = await this.#planner(model);
    const plan = planOf(current);
    const restored = await this.#ipvs.restore([...plan.deletions, ...[...plan.byService.values()].flat()]);
    let operations = restored.lines;
    let restoreMs = restored.durationMs;
    if (restored.stderr) {
      const retried = await this.#retryRefused(planOf, model, restored.stderr, failures, warnings);
      operations += retried.operations;
      restoreMs += retried.restoreMs;
    }
    this.#draining = plan.draining;
    // Only a clean apply says what is in the kernel now; after a refusal the next save is all there is to go by.
    this.#inPlace = restored.stderr ? { services: new Set(), destinations: new Set() } : wanted;
    const inKernel = new Set(current.map((server) => ipvsServiceId(server.service)));
    let added = 0;
    for (const id of model.virtualServers.keys()) if (!inKernel.has(id)) added++;
    return { operations, saveMs, restoreMs, virtualServers: current.length - plan.deletions.length + added, drift };
  }

  /** The wanted services and real servers that the last sync left in place and the kernel no longer has. */
  #driftIn(current: readonly IpvsVirtualServer[], wanted: IpvsObjects): IpvsApplied['drift'] {
    const found = wantedObjects({ virtualServers: new Map(current.map((server) => [ipvsServiceId(server.service), server])) });
    return {
      services: [...this.#inPlace.services].filter((id) => wanted.services.has(id) && !found.services.has(id)),
      // A real server of a service that is gone is counted with its service.
      destinations: [...this.#inPlace.destinations].filter(
        (key) => wanted.destinations.has(key) && !found.destinations.has(key) && found.services.has(key.slice(0, key.indexOf('>'))),
      ),
    };
  }

  /** Plans from a kernel state to the model; the connection counts of the real servers are read while any drains. */
  async #planner(model: ProxyModel): Promise<(state: readonly IpvsVirtualServer[]) => IpvsPlan> {
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
    return (state) => planIpvs(state, model.virtualServers, context);
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
  ): Promise<{ operations: number; restoreMs: number }> {
    let operations = 0;
    let restoreMs = 0;
    const leftover = planOf(await this.#ipvs.save());
    for (const [id, serviceLines] of leftover.byService) {
      const owner = model.virtualServers.get(id)?.owner ?? id;
      const retry = await this.#ipvs.restore(serviceLines);
      operations += retry.lines;
      restoreMs += retry.durationMs;
      if (!retry.stderr) continue;
      const error = new Error(`IPVS refused ${id}: ${retry.stderr}`);
      failures.add(`service/${owner}`, error);
      warnings.warn(owner, 'IpvsServiceNotProgrammed', error.message);
    }
    for (const line of leftover.deletions) failures.add(`ipvs-cleanup/${line}`, new Error(`IPVS refused "${line}": ${stderr}`));
    return { operations, restoreMs };
  }
}

/** Service ids and real server keys (drainKey) of a set of virtual servers. */
interface IpvsObjects {
  readonly services: ReadonlySet<string>;
  readonly destinations: ReadonlySet<string>;
}

function wantedObjects(model: { readonly virtualServers: ReadonlyMap<string, IpvsVirtualServer> }): IpvsObjects {
  const services = new Set<string>();
  const destinations = new Set<string>();
  for (const [id, server] of model.virtualServers) {
    services.add(id);
    for (const destination of server.destinations) destinations.add(drainKey(server.service, destination));
  }
  return { services, destinations };
}
