import type { CoreV1Api, V1Service } from '@kubernetes/client-node';
import { callApi, statusCodeOf } from '@kube-router/kube';
import { ingressIPs, isOurs, type PlanOptions } from './plan.js';

/** How many times a status update that conflicts (409) is re-read and retried before it counts as failed. */
const CONFLICT_RETRIES = 5;

export class StatusConflictError extends Error {
  constructor(key: string) {
    super(`status update of ${key} still conflicted after ${CONFLICT_RETRIES} attempts`);
    this.name = 'StatusConflictError';
  }
}

export interface WriteOptions extends PlanOptions {
  releasing: boolean;
  /**
   * Bound on each request. It must stay below the lease duration minus the renew deadline, so that a write sent
   * by a leader just before it steps down cannot land after another replica has taken the Lease.
   */
  timeoutMs: number;
  signal: AbortSignal;
  /**
   * Whether this replica still holds the Lease. A conflicted write is retried only while it does: a deposed leader
   * whose write came back 409 (the new leader's fence moved the Service on) must not re-read and write again.
   */
  stillLeading?: () => boolean;
}

/** The condition a new leader writes on every Service it serves before it plans (see fenceService). */
export const FENCE_CONDITION = 'kube-router.io/LoadBalancerIPAllocator';

/**
 * Fences one Service for a new leader: a status write that only records, as a condition, which replica allocates
 * now and since when. Its point is the new resourceVersion: every write the previous leader planned before the
 * takeover carries an older one, so the API server refuses it with 409 however late it arrives (a request delayed
 * in the network, a process paused past its lease). The Lease alone cannot stop such a write; this makes the
 * API server's optimistic concurrency the fence. It needs only the services/status update that allocation needs.
 *
 * A 409 or 404 counts as fenced: the Service has already moved past anything the previous leader read.
 */
export async function fenceService(
  api: CoreV1Api,
  service: V1Service,
  leader: string,
  options: { timeoutMs: number; signal: AbortSignal; now?: Date },
): Promise<void> {
  const namespace = service.metadata?.namespace ?? '';
  const name = service.metadata?.name ?? '';
  const condition = {
    type: FENCE_CONDITION,
    status: 'True',
    reason: 'Allocating',
    message: `addresses allocated by ${leader}`,
    // Its change is what makes the write a fence even when the same replica leads again.
    lastTransitionTime: options.now ?? new Date(),
  };
  const conditions = [...(service.status?.conditions ?? []).filter((c) => c.type !== FENCE_CONDITION), condition];
  const body: V1Service = { ...service, status: { ...service.status, conditions } };
  try {
    await callApi(
      `fence service ${namespace}/${name}`,
      options.timeoutMs,
      (o) => api.replaceNamespacedServiceStatus({ namespace, name, body }, o),
      options.signal,
    );
  } catch (error) {
    const code = statusCodeOf(error);
    if (code !== 404 && code !== 409) throw error;
  }
}

/**
 * Writes a planned ingress list to a Service's status subresource with optimistic concurrency. On a 409 it re-reads
 * the Service and retries only if the Service is still ours and its ingress is still what the plan was made from;
 * otherwise it gives up quietly and the next sync plans again from the fresh state. A Service deleted meanwhile
 * (404) is given up quietly too.
 *
 * Returns false when the write was abandoned because the Service changed or went away.
 */
export async function writeIngress(api: CoreV1Api, planned: V1Service, ingress: string[], options: WriteOptions): Promise<boolean> {
  const namespace = planned.metadata?.namespace ?? '';
  const name = planned.metadata?.name ?? '';
  const basis = ingressIPs(planned).join(',');
  const call = <T>(what: string, request: Parameters<typeof callApi<T>>[2]) =>
    callApi(`${what} ${namespace}/${name}`, options.timeoutMs, request, options.signal);
  let current = planned;
  for (let attempt = 0; ; attempt++) {
    const body: V1Service = {
      ...current,
      status: { ...current.status, loadBalancer: { ingress: ingress.map((ip) => ({ ip })) } },
    };
    try {
      await call('update status of service', (o) => api.replaceNamespacedServiceStatus({ namespace, name, body }, o));
      return true;
    } catch (error) {
      const code = statusCodeOf(error);
      if (code === 404) return false;
      if (code !== 409) throw error;
    }
    if (options.stillLeading && !options.stillLeading()) return false;
    if (attempt + 1 >= CONFLICT_RETRIES) throw new StatusConflictError(`${namespace}/${name}`);
    try {
      current = await call('read service', (o) => api.readNamespacedService({ namespace, name }, o));
    } catch (error) {
      if (statusCodeOf(error) === 404) return false;
      throw error;
    }
    const stillWanted = options.releasing ? current.spec?.type !== 'LoadBalancer' : isOurs(current, options);
    if (!stillWanted || ingressIPs(current).join(',') !== basis) return false;
  }
}
