import type { V1Node } from '@kubernetes/client-node';

/** A Node at `address` (an IPv4 address) whose pod CIDR is 10.<last octet>.0.0/24. */
export const meshNode = (name: string, address: string, annotations: Record<string, string> = {}): V1Node => ({
  metadata: { name, annotations },
  spec: { podCIDR: `10.${address.split('.')[3]}.0.0/24`, podCIDRs: [`10.${address.split('.')[3]}.0.0/24`] },
  status: { addresses: [{ type: 'InternalIP', address }] },
});

/** The Node lister and Warning recorder of a routing stage's cluster, over a list the test replaces at will. */
export function fakeNodes(initial: V1Node[]) {
  let nodes = initial;
  const warnings: string[] = [];
  return {
    warnings,
    setNodes: (next: V1Node[]) => (nodes = next),
    cluster: {
      nodes: { list: () => nodes, get: (name: string) => nodes.find((n) => n.metadata?.name === name), hasSynced: () => true },
      warn: (node: V1Node, reason: string, message: string) => void warnings.push(`${node.metadata?.name} ${reason}: ${message}`),
    },
  };
}
