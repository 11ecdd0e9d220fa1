import type { LabProtocol } from '../lab/index.js';

/**
 * The world every case runs in, as in the Kubernetes e2e network policy tests: namespaces x, y, z, each with pods
 * a, b, c, each serving ports 80 and 81 on TCP and UDP. Pods are named by key, `"x/a"`.
 */
export const NAMESPACES = ['x', 'y', 'z'] as const;
export const POD_NAMES = ['a', 'b', 'c'] as const;
export const PORTS = [80, 81] as const;
export const PROTOCOLS = ['TCP', 'UDP'] as const satisfies readonly LabProtocol[];

export type ProbeProtocol = (typeof PROTOCOLS)[number];
export type IpFamily = 4 | 6;

/** `"x/a"`: a pod of the world. */
export type PodKey = `${string}/${string}`;

export const POD_KEYS: readonly PodKey[] = NAMESPACES.flatMap((namespace) => POD_NAMES.map((name): PodKey => `${namespace}/${name}`));

/** The labels a namespace starts with (the API server adds `kubernetes.io/metadata.name`). */
export function namespaceLabels(namespace: string): Record<string, string> {
  return { ns: namespace };
}

/** The labels a pod starts with. */
export function podLabels(name: string): Record<string, string> {
  return { pod: name };
}

/** The name of the container port that serves `port`/`protocol`, for named-port cases: `serve-80-tcp`. */
export function portName(port: number, protocol: ProbeProtocol): string {
  return `serve-${port}-${protocol.toLowerCase()}`;
}

export function containerPorts(): { port: number; protocol: ProbeProtocol; name: string }[] {
  return PORTS.flatMap((port) => PROTOCOLS.map((protocol) => ({ port, protocol, name: portName(port, protocol) })));
}

export function splitPodKey(key: string): { namespace: string; name: string } {
  const [namespace = '', name = ''] = key.split('/');
  return { namespace, name };
}
