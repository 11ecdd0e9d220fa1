import type { Direction, LocalPod } from '../model.js';

/**
 * What a local pod's chain in one direction does, the same on every backend: it fails closed (a policy selecting the
 * pod did not compile, or the kernel refused it), or it runs the policies that isolate the pod and rejects what none
 * of them allowed. `why` is the reason in the reject rule's comment.
 */
export type PodChainPlan =
  | { readonly failClosed: true; readonly why: string }
  | { readonly failClosed: false; readonly policies: readonly string[]; readonly why: string };

/**
 * The pod's chain in `direction`, or undefined when nothing restricts that direction (no policy isolates it and
 * isolateUnselectedPods is off): then the pod has no chain and its traffic is not the policies' business.
 */
export function podChainPlan(
  pod: LocalPod,
  direction: Direction,
  isolateUnselectedPods: boolean,
  failedPolicies: ReadonlySet<string>,
): PodChainPlan | undefined {
  const state = pod[direction];
  if (!state.isolated && !isolateUnselectedPods) return undefined;
  // No new connection passes in this direction, whatever the broken policy meant to allow. Replies of connections the
  // other direction allowed still flow (the common chain comes first): failing ingress closed must not cut egress.
  if (state.failClosed || state.policies.some((id) => failedPolicies.has(id))) {
    return { failClosed: true, why: 'a network policy selecting it could not be programmed' };
  }
  const why = state.isolated ? 'no network policy allows it' : 'no network policy selects it (isolateUnselectedPods)';
  return { failClosed: false, policies: state.policies, why };
}

/** kube-router's name of a pod in rule comments. */
export function podInComments(pod: LocalPod): string {
  return `POD name:${pod.name} namespace: ${pod.namespace}`;
}
