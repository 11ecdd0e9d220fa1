import type { V1Node } from '@kubernetes/client-node';
import { messageOf } from '@kube-router/controller';
import { enabledAddresses, missingFamilyProblem, nodeAddresses, type Family, type NodeAddresses } from './nodes.js';
import type { RoutingCluster, RoutingSettings } from './settings.js';

/**
 * This node's addresses of the families it routes (--enable-ipv4, --enable-ipv6). Without them it can neither peer
 * nor announce, so the whole sync fails: this throws, and the Node gets an InvalidNodeAddress Warning saying why.
 */
export function routedAddresses(node: V1Node, enabledFamilies: RoutingSettings['enabledFamilies'], warn: RoutingCluster['warn']): NodeAddresses {
  let addresses: NodeAddresses;
  try {
    addresses = nodeAddresses(node);
  } catch (error) {
    warn(node, 'InvalidNodeAddress', `cannot route pods: ${messageOf(error)}`);
    throw error;
  }
  if (!enabledFamilies) return addresses;
  const familyProblem = missingFamilyProblem(addresses, enabledFamilies);
  if (familyProblem) {
    // As kube-router, which then does not start its routing controller: the flags promise a family the node lacks.
    warn(node, 'InvalidNodeAddress', `cannot route pods: ${familyProblem}`);
    throw new Error(`node ${node.metadata?.name}: ${familyProblem}`);
  }
  return enabledAddresses(addresses, enabledFamilies);
}

/** The families the node has an address of, IPv4 first. */
export function familiesOf(addresses: NodeAddresses): Family[] {
  return (['ipv4', 'ipv6'] as const).filter((family) => addresses.byFamily[family] !== undefined);
}
