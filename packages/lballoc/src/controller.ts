import type { CoreV1Api, V1Service } from '@kubernetes/client-node';
import { createSyncController, SyncFailures, type Controller, type PluginContext } from '@kube-router/controller';
import { callApi, statusCodeOf } from '@kube-router/kube';
import { isOurs, planAllocations, type PlanOptions } from './plan.js';
import { AddressPool } from './pool.js';
import { fenceService, writeIngress } from './status-writer.js';

/** The controller's name: its health check and the `controller` label of its sync metrics. */
export const LBALLOC_CONTROLLER = 'lballoc';

/** What the allocator needs of the cluster; the plugin wires it to @kube-router/kube. */
export interface LballocCluster {
  api: CoreV1Api;
  /**
   * Lists every Service as plain JSON, so that one of the wrong shape fails alone in planning instead of making the
   * whole list throw in client-node's deserialiser. Without it, `api.listServiceForAllNamespaces` is used.
   */
  listServices?(timeoutMs: number, signal: AbortSignal): Promise<unknown[]>;
  /** Whether this replica holds the allocator's Lease right now. */
  isLeader(): boolean;
  /** Counts this replica's terms as leader: it changes each time the replica starts leading. */
  leadershipTerm(): number;
  /** This replica's identity in the Lease, recorded on the Services it fences. */
  identity: string;
  /** Records a Warning event on a Service. Never throws. */
  warn(service: V1Service, reason: string, message: string): void;
  /** Registers for Service changes; returns the unsubscribe function. */
  onServicesChanged(handler: () => void): () => void;
  /** Starts and stops leader election with the controller. */
  startElection(onLeadershipChange: () => void): void;
  stopElection(): Promise<void>;
}

export interface LballocSettings extends PlanOptions {
  ranges: readonly string[];
  syncPeriodMs: number;
  minSyncIntervalMs?: number;
  syncTimeoutMs?: number;
  /** Bound on the list of every Service. Default 30 s. */
  listTimeoutMs?: number;
  /** Bound on each status write; below lease duration minus renew deadline (5 s with kube-router's). Default 4 s. */
  writeTimeoutMs?: number;
}

/** Fence writes in flight at once when a new leader takes over. */
const FENCE_CONCURRENCY = 8;

/** A write the API server refused for the object's own sake (4xx), or one the client could not even encode. */
function unwritable(error: unknown): boolean {
  const code = statusCodeOf(error);
  return (code !== undefined && code >= 400 && code < 500) || error instanceof TypeError;
}

/**
 * LoadBalancer IP allocation. Every replica runs the loop and beats; only the Lease holder writes. Each leader sync
 * lists Services from the API server rather than a cache, so that a new leader sees every address its predecessor
 * handed out before it plans, and every write carries the resourceVersion it was planned from.
 */
export function createLballocController(ctx: PluginContext, cluster: LballocCluster, settings: LballocSettings): Controller {
  // A bad range must not take the agent down with it: every sync fails with the reason, and each Service that
  // waits for an address gets an event saying why.
  let pool: AddressPool | undefined;
  let poolError: Error | undefined;
  try {
    pool = new AddressPool(settings.ranges);
  } catch (error) {
    poolError = error instanceof Error ? error : new Error(String(error));
  }
  let unsubscribe: (() => void) | undefined;
  /** The leadership term whose Services have been fenced; a sync as leader in another term fences first. */
  let fencedTerm: number | undefined;

  const listServices = async (signal: AbortSignal): Promise<V1Service[]> => {
    const listTimeoutMs = settings.listTimeoutMs ?? 30_000;
    // Planning reads every field defensively, so raw JSON items are as good as V1Service objects to it.
    if (cluster.listServices) return (await cluster.listServices(listTimeoutMs, signal)) as V1Service[];
    const list = await callApi('list services', listTimeoutMs, (options) => cluster.api.listServiceForAllNamespaces({}, options), signal);
    return list.items;
  };

  /**
   * A new leader's first step: every Service it serves gets a status write (fenceService) before it plans, so that
   * no write its predecessor planned can land afterwards. A Service the API server refuses (4xx) or that cannot even
   * be encoded cannot take the predecessor's write either: its failure joins the sync's and the walk goes on. Any
   * other failure (5xx, timeout, no connection) ends the sync before any allocation, and the next sync fences again.
   */
  const fence = async (services: V1Service[], failures: SyncFailures, signal: AbortSignal): Promise<void> => {
    const served = services.filter((service) => safelyOurs(service));
    let unfenced: unknown;
    for (let index = 0; index < served.length; index += FENCE_CONCURRENCY) {
      if (!cluster.isLeader()) {
        failures.add('fence', new Error('lost the Lease while fencing'));
        failures.throwIfAny(LBALLOC_CONTROLLER);
      }
      await Promise.all(
        served.slice(index, index + FENCE_CONCURRENCY).map(async (service) => {
          const object = `fence/${service.metadata?.namespace}/${service.metadata?.name}`;
          try {
            await fenceService(cluster.api, service, cluster.identity, { timeoutMs: settings.writeTimeoutMs ?? 4_000, signal });
          } catch (error) {
            failures.add(object, error);
            if (!unwritable(error)) unfenced ??= error;
          }
        }),
      );
    }
    if (served.length > 0) ctx.logger.info({ services: served.length, failed: failures.size }, 'fenced the Services of the previous leader');
    if (unfenced !== undefined) failures.throwIfAny(LBALLOC_CONTROLLER);
  };
  const safelyOurs = (service: V1Service): boolean => {
    try {
      return isOurs(service, settings);
    } catch {
      return false;
    }
  };

  return createSyncController(ctx, {
    name: LBALLOC_CONTROLLER,
    syncPeriodMs: settings.syncPeriodMs,
    ...(settings.minSyncIntervalMs !== undefined && { minSyncIntervalMs: settings.minSyncIntervalMs }),
    ...(settings.syncTimeoutMs !== undefined && { syncTimeoutMs: settings.syncTimeoutMs }),
    start({ requestSync }) {
      unsubscribe = cluster.onServicesChanged(() => requestSync('services'));
      cluster.startElection(() => requestSync('leadership'));
    },
    async stop() {
      unsubscribe?.();
      await cluster.stopElection();
    },
    async sync({ progress, signal }) {
      if (!cluster.isLeader()) return;
      const failures = new SyncFailures();
      const term = cluster.leadershipTerm();
      // A leader that allocates nothing (a bad range) has no write to fence against.
      if (pool && fencedTerm !== term) {
        await fence(await listServices(signal), failures, signal);
        fencedTerm = term;
      }
      const services = await listServices(signal);
      if (!pool) {
        for (const svc of services) {
          if (!isOurs(svc, settings)) continue;
          cluster.warn(svc, 'InvalidLoadBalancerIPRange', poolError!.message);
          failures.add(`service/${svc.metadata?.namespace}/${svc.metadata?.name}`, poolError);
        }
        if (failures.size === 0) failures.add('--loadbalancer-ip-range', poolError);
        failures.throwIfAny(LBALLOC_CONTROLLER);
        return;
      }

      const planned = planAllocations(services, pool, settings);
      let written = 0;
      for (const { service, key, decision } of planned) {
        if (decision.action === 'keep') continue;
        // A replica that lost the Lease mid-walk stops writing at once; the new leader re-plans from the API.
        if (!cluster.isLeader() || signal.aborted) break;
        const object = `service/${key}`;
        if (decision.action === 'fail') {
          cluster.warn(service, 'LoadBalancerIPAllocationFailed', decision.reason);
          failures.add(object, new Error(decision.reason));
          continue;
        }
        if (decision.action === 'assign' && decision.repairs.length > 0) {
          cluster.warn(service, 'LoadBalancerIPReassigned', decision.repairs.join('; '));
        }
        if (decision.action === 'assign' && decision.problems.length > 0) {
          const reason = decision.problems.join('; ');
          cluster.warn(service, 'LoadBalancerIPAllocationFailed', reason);
          failures.add(object, new Error(reason));
        }
        await failures.attempt(object, async () => {
          try {
            await writeIngress(cluster.api, service, decision.ingress, {
              ...settings,
              releasing: decision.action === 'release',
              timeoutMs: settings.writeTimeoutMs ?? 4_000,
              signal,
              stillLeading: () => cluster.isLeader(),
            });
          } catch (error) {
            cluster.warn(service, 'LoadBalancerStatusUpdateFailed', `could not write ${decision.ingress.join(', ')}: ${String(error)}`);
            throw error;
          }
        });
        if (++written % 100 === 0) progress();
      }
      ctx.logger.debug({ services: services.length, written, failed: failures.size }, 'allocation walk ended');
      failures.throwIfAny(LBALLOC_CONTROLLER);
    },
  });
}
