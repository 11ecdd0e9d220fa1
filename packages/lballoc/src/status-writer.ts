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
