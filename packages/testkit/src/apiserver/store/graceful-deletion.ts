// kube-apiserver's graceful deletion of Pods (rest.BeforeDelete with the pod strategy's CheckGracefulDelete): a DELETE
// of a pod that runs somewhere only marks it, and the kubelet removes it once its containers stopped.
import type { KubeObject } from '../kube-object.js';
import { isPlainObject } from '../kube-object.js';

/** What the pod strategy falls back to: spec.terminationGracePeriodSeconds, which Pod defaulting sets to 30. */
export const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30;

/** What a DELETE does to a pod: remove it now, leave a pending deletion as it is, or (re)mark it. */
export type GracefulDeletion =
  | { action: 'delete' }
  | { action: 'pending' }
  | { action: 'mark'; deletionTimestamp: string; deletionGracePeriodSeconds: number; firstMark: boolean };

function timestampAt(epochMs: number): string {
  // metav1.Time serializes at second precision.
  return new Date(Math.floor(epochMs / 1000) * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
}

function requestedGrace(gracePeriodSeconds: number | undefined): number | undefined {
  // Negative values are treated as 1 s on the delete path.
  return gracePeriodSeconds !== undefined && gracePeriodSeconds < 0 ? 1 : gracePeriodSeconds;
}

/**
 * How a DELETE with `gracePeriodSeconds` (undefined when DeleteOptions set none) treats `pod`, at `nowMs`:
 * - already terminating: only a shorter grace period changes anything (a deletion moved earlier; 0 removes the pod
 *   now); a longer one, or none, leaves the pending deletion alone; one pending with 0 (or no) grace goes now;
 * - otherwise the grace is the request's, else spec.terminationGracePeriodSeconds, else 30 s; 0 for a pod bound to no
 *   node or already Succeeded/Failed (no kubelet would ever remove it); 0 removes the pod now, more marks it.
 */
export function podGracefulDeletion(pod: KubeObject, gracePeriodSeconds: number | undefined, nowMs: number): GracefulDeletion {
  const requested = requestedGrace(gracePeriodSeconds);
  const { deletionTimestamp, deletionGracePeriodSeconds } = pod.metadata;
  if (typeof deletionTimestamp === 'string' && deletionTimestamp !== '') {
    const stored = typeof deletionGracePeriodSeconds === 'number' ? deletionGracePeriodSeconds : 0;
    const current = stored < 0 ? 1 : stored;
    if (current === 0) return { action: 'delete' };
    if (requested === undefined || requested >= current) return { action: 'pending' };
    if (requested === 0) return { action: 'delete' };
    const started = Date.parse(deletionTimestamp) - current * 1000;
    return { action: 'mark', deletionTimestamp: timestampAt(started + requested * 1000), deletionGracePeriodSeconds: requested, firstMark: false };
  }
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  const status = isPlainObject(pod.status) ? pod.status : {};
  let grace = requested ?? (typeof spec.terminationGracePeriodSeconds === 'number' ? spec.terminationGracePeriodSeconds : DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS);
  if (typeof spec.nodeName !== 'string' || spec.nodeName === '') grace = 0;
  if (status.phase === 'Succeeded' || status.phase === 'Failed') grace = 0;
  if (grace < 0) grace = 1;
  if (grace === 0) return { action: 'delete' };
  return { action: 'mark', deletionTimestamp: timestampAt(nowMs + grace * 1000), deletionGracePeriodSeconds: grace, firstMark: true };
}
