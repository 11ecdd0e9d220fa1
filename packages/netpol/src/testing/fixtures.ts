import type { NamespaceLike, NetworkPolicyLike, NetworkPolicySpecLike, PodLike } from '../types.js';

export const NODE = 'node-a';

export interface PodOptions {
  readonly labels?: Record<string, string>;
  readonly ips?: readonly string[];
  readonly node?: string;
  readonly ports?: readonly { readonly name: string; readonly port: number; readonly protocol?: string }[];
  readonly phase?: string;
  readonly hostNetwork?: boolean;
  readonly deleting?: boolean;
}

/** A pod `namespace/name`, on NODE unless told otherwise, Running. */
export function pod(id: string, options: PodOptions = {}): PodLike {
  const [namespace, name] = id.split('/') as [string, string];
  const ips = options.ips ?? [];
  return {
    metadata: {
      namespace,
      name,
      labels: options.labels ?? {},
      ...(options.deleting ? { deletionTimestamp: new Date(0) } : {}),
    },
    spec: {
      nodeName: options.node ?? NODE,
      hostNetwork: options.hostNetwork ?? false,
      containers: [
        {
          ports: (options.ports ?? []).map((port) => ({
            name: port.name,
            containerPort: port.port,
            ...(port.protocol ? { protocol: port.protocol } : {}),
          })),
        },
      ],
    },
    status: {
      phase: options.phase ?? 'Running',
      ...(ips[0] ? { podIP: ips[0] } : {}),
      podIPs: ips.map((ip) => ({ ip })),
    },
  };
}

/** A namespace with the label the API server adds to every namespace. */
export function namespace(name: string, labels: Record<string, string> = {}): NamespaceLike {
  return { metadata: { name, labels: { 'kubernetes.io/metadata.name': name, ...labels } } };
}

export function policy(id: string, spec: unknown): NetworkPolicyLike {
  const [namespace, name] = id.split('/') as [string, string];
  return { metadata: { namespace, name }, spec: spec as NetworkPolicySpecLike };
}

/** A small deterministic random generator (mulberry32), so that randomised tests replay the same way. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
