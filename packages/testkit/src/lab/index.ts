export { startLab, DEFAULT_LAB_NODE_NAME, DEFAULT_LAB_POD_CIDRS } from './lab.js';
export { startLabCluster, defaultClusterNodes } from './cluster.js';
export { createLabUnderlay, DEFAULT_UNDERLAY_CIDRS } from './underlay.js';
export { cleanupStale } from './cleanup-stale.js';
export { LabKubelet, podKeyOf } from './kubelet.js';
export type { RunningPod as LabRunningPod } from './kubelet.js';
export { KUBEADM_MOUNT_PATHS, writeKubeadmNodeFiles } from './kubeadm-node.js';
export { unsupportedProtocolReason } from './protocols.js';
export { NETNS_ANNOTATION, LAB_POD_IMAGE } from './pod-objects.js';
export { NODE_UPLINK_INTERFACE, POD_GATEWAY_V4, POD_GATEWAY_V6, POD_INTERFACE } from './lab-node.js';
export { DEFAULT_PROBE_TIMEOUT_MS } from './probing.js';
export { LAB_PREFIX } from './names.js';
export { LabCommandError } from './run-command.js';
export { hasTool, labSkipReason } from './preconditions.js';

export type { Lab, LabOptions, LabPod } from './lab.js';
export type { LabCluster, LabClusterNodeSpec, LabClusterOptions } from './cluster.js';
export type { LabUnderlay, LabUnderlayOptions } from './underlay.js';
export type { LabNodeUplink } from './lab-node.js';
export { POD_AGENT_FILES } from './kubelet-node.js';
export type { KubeletNode, KubeletSandbox } from './kubelet-node.js';
export type { LabPodSpec } from './pod-objects.js';
export type { ContainerPort as LabContainerPort, SkippedPort as LabSkippedPort } from './lab-node.js';
export type { ListenPort as LabListenPort } from './pod-agent.js';
export type { IpFamily as LabIpFamily } from './ip-allocator.js';
export type { StaleCleanupOptions, StaleCleanupReport } from './cleanup-stale.js';
export type { KubeadmMount, KubeadmNodeFiles } from './kubeadm-node.js';
export type {
  LabProtocol,
  PodRef,
  ProbeOptions,
  ProbeOutcome,
  ProbeRequest,
  ProbeResult,
  ProbeSource,
} from './probe-types.js';
