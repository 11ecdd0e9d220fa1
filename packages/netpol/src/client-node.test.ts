import { V1Namespace, V1NetworkPolicy, V1Pod, loadYaml } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { compileNetworkPolicies } from './compiler.js';
import { evaluateFlow } from './evaluate.js';
import type { NamespaceLike, NetworkPolicyLike, PodLike } from './types.js';

// Compile-time check: the client's classes satisfy the structural input types.
const _pod: PodLike = new V1Pod();
const _namespace: NamespaceLike = new V1Namespace();
const _policy: NetworkPolicyLike = new V1NetworkPolicy();

describe('objects from @kubernetes/client-node', () => {
  it('compile like the wire JSON they were read from, `_from` included', () => {
    const wire = {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { namespace: 'prod', name: 'from-api', resourceVersion: '7' },
      spec: {
        podSelector: { matchLabels: { app: 'web' } },
        policyTypes: ['Ingress'],
        ingress: [
          { from: [{ podSelector: { matchLabels: { app: 'api' } } }], ports: [{ protocol: 'TCP', port: 'http' }] },
        ],
      },
    };
    // loadYaml deserialises into the client's model classes, as its API calls and informers do.
    const policy = loadYaml<V1NetworkPolicy>(JSON.stringify(wire));
    expect(policy).toBeInstanceOf(V1NetworkPolicy);
    expect(policy.spec?.ingress?.[0]?._from).toHaveLength(1);
    const pods = [
      {
        metadata: { namespace: 'prod', name: 'web', labels: { app: 'web' }, deletionTimestamp: '2026-01-01T00:00:00Z' },
        spec: {
          nodeName: 'node-a',
          containers: [{ name: 'c', image: 'i', ports: [{ name: 'http', containerPort: 8080 }] }],
        },
        status: { phase: 'Running', podIP: '10.0.0.1', podIPs: [{ ip: '10.0.0.1' }] },
      },
      {
        metadata: { namespace: 'prod', name: 'api', labels: { app: 'api' } },
        spec: { nodeName: 'node-b', containers: [{ name: 'c', image: 'i' }] },
        status: { phase: 'Running', podIP: '10.0.0.2' },
      },
    ].map((pod) => loadYaml<V1Pod>(JSON.stringify({ apiVersion: 'v1', kind: 'Pod', ...pod })));
    const namespaces = [
      loadYaml<V1Namespace>(JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'prod' } })),
    ];

    const fromClient = compileNetworkPolicies({ nodeName: 'node-a', pods, namespaces, policies: [policy] });
    const fromWire = compileNetworkPolicies({
      nodeName: 'node-a',
      pods,
      namespaces,
      policies: [wire as NetworkPolicyLike],
    });
    expect(fromClient.problems).toEqual([]);
    expect(fromClient).toEqual(fromWire);
    const flow = (port: number) =>
      evaluateFlow(fromClient, { source: '10.0.0.2', destination: '10.0.0.1', protocol: 'TCP', port }).allowed;
    expect([flow(8080), flow(80)]).toEqual([true, false]);
  });
});
