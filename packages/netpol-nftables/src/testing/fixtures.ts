import { compileNetworkPolicies } from '@kube-router/netpol';
import type { NamespaceLike, NetworkPolicyLike, PodLike, PolicyModel } from '@kube-router/netpol';

export const NODE = 'node-a';

export function pod(
  id: string,
  ips: readonly string[],
  labels: Record<string, string> = {},
  options: { node?: string; ports?: readonly { name: string; port: number }[] } = {},
): PodLike {
  const [namespace, name] = id.split('/') as [string, string];
  return {
    metadata: { namespace, name, labels },
    spec: {
      nodeName: options.node ?? NODE,
      containers: [{ ports: (options.ports ?? []).map((p) => ({ name: p.name, containerPort: p.port })) }],
    },
    status: { phase: 'Running', podIP: ips[0], podIPs: ips.map((ip) => ({ ip })) },
  } as PodLike;
}

export function namespace(name: string, labels: Record<string, string> = {}): NamespaceLike {
  return { metadata: { name, labels: { 'kubernetes.io/metadata.name': name, ...labels } } } as NamespaceLike;
}

export function policy(id: string, spec: unknown): NetworkPolicyLike {
  const [ns, name] = id.split('/') as [string, string];
  return { metadata: { namespace: ns, name }, spec } as NetworkPolicyLike;
}

/** A small cluster: two local pods in `web` (dual-stack), a remote one in `other`. */
export function smallCluster(policies: readonly NetworkPolicyLike[]): PolicyModel {
  return compileNetworkPolicies({
    nodeName: NODE,
    pods: [
      pod('web/server', ['10.0.0.2', 'fd00::2'], { app: 'server' }, { ports: [{ name: 'http', port: 8080 }] }),
      pod('web/client', ['10.0.0.3', 'fd00::3'], { app: 'client' }),
      pod('other/client', ['10.0.1.3', 'fd00:1::3'], { app: 'client' }, { node: 'node-b' }),
    ],
    namespaces: [namespace('web', { team: 'web' }), namespace('other', { team: 'other' })],
    policies,
  });
}
