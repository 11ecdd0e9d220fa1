import type { V1Node, V1NodeStatus, V1Pod, V1PodStatus } from '@kubernetes/client-node';
import type { ContainerPort } from './lab-node.js';
import type { KubeletSandbox } from './kubelet-node.js';
import type { LabProtocol } from './probe-types.js';

/** The annotation that names a pod's (or the node's) network namespace. */
export const NETNS_ANNOTATION = 'lab.kube-router.io/netns';
/** The image of the lab's pods; no container runtime ever pulls it. */
export const LAB_POD_IMAGE = 'lab.kube-router.io/agent:latest';

export interface LabPodSpec {
  namespace?: string;
  name: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ports?: readonly ContainerPort[];
}

export function podManifest(spec: LabPodSpec, nodeName: string): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: spec.name,
      namespace: spec.namespace ?? 'default',
      labels: { ...spec.labels },
      annotations: { ...spec.annotations },
    },
    spec: {
      nodeName,
      containers: [
        {
          name: 'agent',
          image: LAB_POD_IMAGE,
          ports: (spec.ports ?? []).map((port) => ({
            containerPort: port.port,
            protocol: port.protocol ?? 'TCP',
            ...(port.name ? { name: port.name } : {}),
          })),
        },
      ],
    },
  };
}

/** Every container port of a pod, init containers excluded, as the lab serves them. */
export function containerPorts(pod: V1Pod): ContainerPort[] {
  return (pod.spec?.containers ?? []).flatMap((container) =>
    (container.ports ?? []).map((port) => ({
      port: port.containerPort,
      protocol: (port.protocol ?? 'TCP') as LabProtocol,
      ...(port.name ? { name: port.name } : {}),
    })),
  );
}

export function runningPodStatus(pod: V1Pod, sandbox: KubeletSandbox, nodeIps: readonly string[], startTime: Date): V1PodStatus {
  const now = new Date();
  const condition = (type: string) => ({ type, status: 'True', lastTransitionTime: now });
  const containers = pod.spec?.containers ?? [];
  return {
    ...pod.status,
    phase: 'Running',
    podIP: sandbox.ips[0],
    podIPs: sandbox.ips.map((ip) => ({ ip })),
    hostIP: nodeIps[0],
    hostIPs: nodeIps.map((ip) => ({ ip })),
    startTime,
    conditions: ['PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map(condition),
    containerStatuses: containers.map((container) => ({
      name: container.name,
      image: container.image ?? LAB_POD_IMAGE,
      imageID: '',
      containerID: `lab://${sandbox.netns}/${container.name}`,
      ready: true,
      started: true,
      restartCount: 0,
      state: { running: { startedAt: startTime } },
    })),
  };
}

/** Whether the pod already shows what the lab would publish for its sandbox. */
export function isPublished(pod: V1Pod, sandbox: KubeletSandbox): boolean {
  const podIps = (pod.status?.podIPs ?? []).map((entry) => entry.ip);
  return (
    pod.metadata?.annotations?.[NETNS_ANNOTATION] === sandbox.netns &&
    pod.status?.phase === 'Running' &&
    podIps.length === sandbox.ips.length &&
    podIps.every((ip, index) => ip === sandbox.ips[index])
  );
}

export function nodeManifest(nodeName: string, podCidrs: readonly string[], netns: string): V1Node {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: nodeName,
      labels: { 'kubernetes.io/hostname': nodeName, 'kubernetes.io/os': 'linux' },
      annotations: { [NETNS_ANNOTATION]: netns },
    },
    spec: { podCIDR: podCidrs[0], podCIDRs: [...podCidrs] },
  };
}

export function readyNodeStatus(nodeName: string, nodeIps: readonly string[]): V1NodeStatus {
  const now = new Date();
  return {
    // The primary family's InternalIP comes first, as the pod CIDRs are ordered.
    addresses: [
      ...nodeIps.map((address) => ({ type: 'InternalIP', address })),
      { type: 'Hostname', address: nodeName },
    ],
    conditions: [
      { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'lab node is ready', lastHeartbeatTime: now, lastTransitionTime: now },
    ],
    nodeInfo: {
      architecture: process.arch === 'x64' ? 'amd64' : process.arch,
      bootID: '',
      containerRuntimeVersion: 'lab://1',
      kernelVersion: '',
      kubeProxyVersion: '',
      kubeletVersion: 'v1.33.0-lab',
      machineID: '',
      operatingSystem: 'linux',
      osImage: 'kube-router network-namespace lab',
      systemUUID: '',
    },
  };
}
