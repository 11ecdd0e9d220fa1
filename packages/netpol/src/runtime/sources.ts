import type { KubeContext, NodePodCidrSource } from '@kube-router/kube';
import type { NamespaceLike, NetworkPolicyLike, PodLike } from '../types.js';

/** Where a netpol controller reads the cluster from: the agent's informers, or anything shaped like them. */
export interface NetpolSources {
  pods(): readonly PodLike[];
  namespaces(): readonly NamespaceLike[];
  policies(): readonly NetworkPolicyLike[];
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
  return {
    pods: () => pods.list(),
    namespaces: () => namespaces.list(),
    policies: () => policies.list(),
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
