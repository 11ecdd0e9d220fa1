import { fileURLToPath } from 'node:url';
import type { ContainerPort } from './lab-node.js';

/** What the kubelet publishes of a pod's sandbox: its network namespace and its addresses. */
export interface KubeletSandbox {
  readonly netns: string;
  /** One address per pod CIDR of the node, in their order. */
  readonly ips: readonly string[];
}

/**
 * The node LabKubelet runs pods on: a LabNode (network namespaces on this host), or any other that makes sandboxes
 * (the QEMU guest's nodes of the IPVS Services scenarios, say). The kubelet only asks for sandboxes and removes them.
 */
export interface KubeletNode<S extends KubeletSandbox = KubeletSandbox> {
  readonly nodeName: string;
  /** The node's addresses: the pods' hostIPs. */
  readonly nodeIps: readonly string[];
  /** Set when pods are attached by CNI plugins: the kubelet then retries a pod whose network is not ready yet. */
  readonly cniConfFile?: string | undefined;
  addSandbox(pod: { namespace: string; name: string; ports: readonly ContainerPort[] }): Promise<S>;
  addHostNetworkSandbox(pod: { namespace: string; name: string; ports: readonly ContainerPort[] }): Promise<S>;
  removeSandbox(sandbox: S): Promise<void>;
}

/**
 * The lab pod's process (`node pod-agent.mjs <netns> <namespace/name> <{ identity, ports } as JSON>`, answering every
 * connection and datagram on its ports with its identity) and the module it imports: a KubeletNode whose pods are not
 * on this host copies both files next to each other where they run.
 */
export const POD_AGENT_FILES: Readonly<Record<'pod-agent.mjs' | 'probe-core.mjs', string>> = {
  'pod-agent.mjs': fileURLToPath(new URL('./pod-agent.mjs', import.meta.url)),
  'probe-core.mjs': fileURLToPath(new URL('./probe-core.mjs', import.meta.url)),
};
