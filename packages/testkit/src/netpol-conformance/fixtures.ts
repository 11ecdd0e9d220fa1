/** Small hand-made cluster objects for the backends' render and kernel unit tests, shaped as the informers give them. */

/** The node the fixtures' local pods run on. */
export const FIXTURE_NODE = 'node-a';

export interface FixturePod {
  metadata: { namespace: string; name: string; labels: Record<string, string> };
  spec: { nodeName: string; containers: { ports: { name: string; containerPort: number }[] }[] };
  status: { phase: 'Running'; podIP: string | undefined; podIPs: { ip: string }[] };
}

export interface FixtureNamespace {
  metadata: { name: string; labels: Record<string, string> };
}

export interface FixturePolicy<Spec = unknown> {
  metadata: { namespace: string; name: string };
  spec: Spec;
}

export function fixturePod(
  id: string,
  ips: readonly string[],
  labels: Record<string, string> = {},
  options: { node?: string; ports?: readonly { name: string; port: number }[] } = {},
): FixturePod {
  const [namespace, name] = id.split('/') as [string, string];
  return {
    metadata: { namespace, name, labels },
    spec: {
      nodeName: options.node ?? FIXTURE_NODE,
      containers: [{ ports: (options.ports ?? []).map((p) => ({ name: p.name, containerPort: p.port })) }],
    },
    status: { phase: 'Running', podIP: ips[0], podIPs: ips.map((ip) => ({ ip })) },
  };
}

export function fixtureNamespace(name: string, labels: Record<string, string> = {}): FixtureNamespace {
  return { metadata: { name, labels: { 'kubernetes.io/metadata.name': name, ...labels } } };
}

export function fixturePolicy<Spec>(id: string, spec: Spec): FixturePolicy<Spec> {
  const [namespace, name] = id.split('/') as [string, string];
  return { metadata: { namespace, name }, spec };
}

/**
 * A small cluster, as the input of a compile: two local pods in `web` (dual-stack, `web/server` names port 8080
 * `http`), a remote one in `other`, and any `extraPods`.
 */
export function smallClusterInput<Policy>(
  policies: readonly Policy[],
  extraPods: readonly FixturePod[] = [],
): { nodeName: string; pods: FixturePod[]; namespaces: FixtureNamespace[]; policies: readonly Policy[] } {
  return {
    nodeName: FIXTURE_NODE,
    pods: [
      fixturePod('web/server', ['10.0.0.2', 'fd00::2'], { app: 'server' }, { ports: [{ name: 'http', port: 8080 }] }),
      fixturePod('web/client', ['10.0.0.3', 'fd00::3'], { app: 'client' }),
      fixturePod('other/client', ['10.0.1.3', 'fd00:1::3'], { app: 'client' }, { node: 'node-b' }),
      ...extraPods,
    ],
    namespaces: [fixtureNamespace('web', { team: 'web' }), fixtureNamespace('other', { team: 'other' })],
    policies,
  };
}
