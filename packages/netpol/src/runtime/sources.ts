import type { KubeContext, NodePodCidrSource } from '@kube-router/kube';
import type { CompileChanges } from '../compiler.js';
import type { NamespaceLike, NetworkPolicyLike, PodLike } from '../types.js';

/** Where a netpol controller reads the cluster from: the agent's informers, or anything shaped like them. */
export interface NetpolSources {
  pods(): readonly PodLike[];
  namespaces(): readonly NamespaceLike[];
  policies(): readonly NetworkPolicyLike[];
  /**
   * The pods, namespaces and policies added, changed or deleted since the last call (each object once, with its latest
   * state), so that a sync triggered by an event compiles only those; undefined when they are not known (too many at
   * once, as after a relist): that sync reads the full lists. Without it every sync reads the full lists.
   */
  takeChanges?(): CompileChanges | undefined;
  /** False until every source has loaded its first list: a sync before that would open every pod. */
  hasSynced(): boolean;
  /** Calls `handler` after pods, namespaces, policies (or the Node) changed; returns a function that removes it. */
  onChange(handler: () => void): () => void;
  /** Records a Warning event on a NetworkPolicy. */
  warnPolicy(namespace: string, name: string, reason: string, message: string): void;
  /** This node's Node object, for its pod CIDRs (--netpol-default-deny); undefined until known or when not watched. */
  node?(): NodePodCidrSource | undefined;
}

/** What informerSources logs with: the plugin's logger. */
export interface WarningLogger {
  warn(details: object, message: string): void;
}

/**
 * The informers as NetpolSources. With `nodeName`, also this node's Node (its pod CIDRs, which only default deny
 * needs): without it, Node updates need not wake the loop.
 */
export function informerSources(kube: KubeContext, logger: WarningLogger, nodeName?: string): NetpolSources {
  const nodes = nodeName === undefined ? undefined : kube.informers.nodes();
  const pods = kube.informers.pods();
  const namespaces = kube.informers.namespaces();
  const policies = kube.informers.networkPolicies();
  // Made now, before the informers start: every change after the first sync's read of the lists is in a take.
  const trackers = {
    pods: kube.informers.trackChanges('pods'),
    namespaces: kube.informers.trackChanges('namespaces'),
    policies: kube.informers.trackChanges('networkpolicies'),
  };
  return {
    pods: () => pods.list(),
    namespaces: () => namespaces.list(),
    policies: () => policies.list(),
    takeChanges() {
      // Every tracker is taken, so that none keeps what the full lists will show anyway.
      const pods = trackers.pods.take();
      const namespaces = trackers.namespaces.take();
      const changed = trackers.policies.take();
      return pods && namespaces && changed ? { pods, namespaces, policies: changed } : undefined;
    },
    hasSynced: () => pods.hasSynced() && namespaces.hasSynced() && policies.hasSynced() && (nodes?.hasSynced() ?? true),
    ...(nodes && nodeName !== undefined ? { node: () => nodes.get(nodeName) } : {}),
    onChange(handler) {
      const resources = ['pods', 'namespaces', 'networkpolicies', ...(nodes ? ['nodes' as const] : [])] as const;
      const removers = resources.map((resource) => kube.informers.onChange(resource, handler));
      return () => removers.forEach((remove) => remove());
    },
    warnPolicy(namespace, name, reason, message) {
      const policy = policies.get(namespace, name);
      // List items come without kind and apiVersion, as from a real API server; the event needs both.
      const involved = policy
        ? { ...policy, apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy' }
        : { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', namespace, name };
      kube.events.warning(involved, reason, message).catch((error: unknown) => {
        logger.warn({ err: error, policy: `${namespace}/${name}`, reason }, 'could not record event');
      });
    },
  };
}
