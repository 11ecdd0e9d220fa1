import { compileNetworkPolicies } from '@kube-router/netpol';
import type { NetworkPolicyLike, PolicyModel } from '@kube-router/netpol';
import { fixturePolicy, smallClusterInput } from '@kube-router/testkit/netpol-conformance';
import type { FixturePod } from '@kube-router/testkit/netpol-conformance';

/** The testkit's small cluster (web/server, web/client, other/client, ...) with these policies, compiled. */
export function compileSmallCluster(policies: readonly NetworkPolicyLike[], extraPods: readonly FixturePod[] = []): PolicyModel {
  return compileNetworkPolicies(smallClusterInput(policies, extraPods));
}

/**
 * The renderers' policy of every kind of peer and port: web/server from client pods of any namespace and from an
 * ipBlock with an except, on a named port and a UDP port range, and `ports` more.
 */
export function serverFromClientsPolicy(ports: readonly Record<string, unknown>[] = []): NetworkPolicyLike {
  return fixturePolicy('web/server-from-clients', {
    podSelector: { matchLabels: { app: 'server' } },
    ingress: [
      {
        from: [
          { namespaceSelector: {}, podSelector: { matchLabels: { app: 'client' } } },
          { ipBlock: { cidr: '192.168.0.0/16', except: ['192.168.1.0/24'] } },
        ],
        ports: [{ port: 'http' }, { port: 9000, endPort: 9010, protocol: 'UDP' }, ...ports],
      },
    ],
  }) as NetworkPolicyLike;
}
