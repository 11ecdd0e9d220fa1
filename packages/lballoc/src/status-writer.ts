import type { CoreV1Api, V1Service } from '@kubernetes/client-node';
import { ingressIPs, isOurs, type PlanOptions } from './plan.js';

/** How many times a status update that conflicts (409) is re-read and retried before it counts as failed. */
const CONFLICT_RETRIES = 5;

export class StatusConflictError extends Error {
  constructor(key: string) {
    super(`status update of ${key} still conflicted after ${CONFLICT_RETRIES} attempts`);
    this.name = 'StatusConflictError';
  }
}

function isConflict(error: unknown): boolean {
  return typeof error === 'object' && error !== null && 'code' in error && (error as { code: unknown }).code === 409;
}

/**
 * Writes a planned ingress list to a Service's status subresource with optimistic concurrency. On a 409 it re-reads
 * the Service and retries only if the Service is still ours and its ingress is still what the plan was made from;
 * otherwise it gives up quietly and the next sync plans again from the fresh state.
 *
 * Returns false when the write was abandoned because the Service changed under us.
 */
export async function writeIngress(
  api: CoreV1Api,
  planned: V1Service,
  ingress: string[],
  options: PlanOptions & { releasing: boolean },
): Promise<boolean> {
  const namespace = planned.metadata?.namespace ?? '';
  const name = planned.metadata?.name ?? '';
  const basis = ingressIPs(planned).join(',');
  let current = planned;
  for (let attempt = 0; attempt < CONFLICT_RETRIES; attempt++) {
    const body: V1Service = {
      ...current,
      status: { ...current.status, loadBalancer: { ingress: ingress.map((ip) => ({ ip })) } },
    };
    try {
      await api.replaceNamespacedServiceStatus({ namespace, name, body });
      return true;
    } catch (error) {
      if (!isConflict(error)) throw error;
    }
    current = await api.readNamespacedService({ namespace, name });
    const stillWanted = options.releasing ? current.spec?.type !== 'LoadBalancer' : isOurs(current, options);
    if (!stillWanted || ingressIPs(current).join(',') !== basis) return false;
  }
  throw new StatusConflictError(`${namespace}/${name}`);
}
