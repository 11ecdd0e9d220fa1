import type { ApiServer } from '../apiserver/server.js';

/**
 * The cluster both netpol backends' benchmarks run on, so that their figures compare: 5,000 pods in 50 namespaces,
 * 200 of them (4 per namespace) on the benchmarked node, dual-stack, and up to 1,000 policies.
 */
export const NETPOL_BENCH_CLUSTER = {
  node: 'bench-node',
  namespaces: 50,
  podsPerNamespace: 100,
  localPerNamespace: 4,
  apps: 20,
} as const;

const { node: NODE, namespaces: NAMESPACES, podsPerNamespace: PODS, localPerNamespace: LOCAL, apps: APPS } = NETPOL_BENCH_CLUSTER;

/** Pod `pod-p` of namespace `ns-n` is number `1 + n * 100 + p`. */
export function benchPodIndex(namespace: number, pod: number): number {
  return 1 + namespace * PODS + pod;
}

export function benchPodIp(index: number): { v4: string; v6: string } {
  return { v4: `10.128.${index >> 8}.${index & 255}`, v6: `fd00:128::${index.toString(16)}` };
}

/** Seeds the namespaces and pods; every pod names its port 8080 `http`. */
export function seedNetpolBenchCluster(api: ApiServer): void {
  for (let n = 0; n < NAMESPACES; n++) {
    api.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: `ns-${n}`, labels: { team: `t-${n % 5}` } } } as never);
  }
  for (let n = 0; n < NAMESPACES; n++) {
    for (let p = 0; p < PODS; p++) {
      const ip = benchPodIp(benchPodIndex(n, p));
      api.create({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { namespace: `ns-${n}`, name: `pod-${p}`, labels: { app: `app-${p % APPS}`, tier: `tier-${p % LOCAL}` } },
        spec: {
          nodeName: p < LOCAL ? NODE : `node-${p % 25}`,
          containers: [{ name: 'c', image: 'x', ports: [{ name: 'http', containerPort: 8080 }] }],
        },
        status: { phase: 'Running', podIP: ip.v4, podIPs: [{ ip: ip.v4 }, { ip: ip.v6 }] },
      } as never);
    }
  }
}

/** Policy k: selects one local pod (by tier) of namespace k % 50 and allows a few peers, some by namespace. */
export function benchPolicy(k: number): Record<string, unknown> {
  const namespace = `ns-${k % NAMESPACES}`;
  const from: unknown[] = [{ podSelector: { matchLabels: { app: `app-${k % APPS}` } } }];
  if (k % 5 === 0) from.push({ namespaceSelector: { matchLabels: { team: `t-${k % 5}` } }, podSelector: { matchLabels: { app: `app-${(k + 1) % APPS}` } } });
  if (k % 10 === 0) from.push({ ipBlock: { cidr: '192.168.0.0/16', except: ['192.168.1.0/24'] } });
  const spec: Record<string, unknown> = {
    podSelector: { matchLabels: { tier: `tier-${k % LOCAL}` } },
    ingress: [{ from, ports: [{ port: 80 + (k % 7) }, { port: 'http' }] }],
  };
  if (k % 4 === 0) {
    spec.policyTypes = ['Ingress', 'Egress'];
    spec.egress = [{ to: [{ podSelector: { matchLabels: { app: `app-${(k + 2) % APPS}` } } }], ports: [{ port: 53, protocol: 'UDP' }] }];
  }
  return { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { namespace, name: `policy-${k}` }, spec };
}

/** What the set of policy k's first ingress rule is keyed by, as both backends' `ruleSetKey` take it. */
export function benchFirstRule(k: number): {
  index: number;
  allPorts: boolean;
  ports: { protocol: string; port: number }[];
  namedPorts: { name: string; protocol: string }[];
} {
  return { index: 0, allPorts: false, ports: [{ protocol: 'TCP', port: 80 + (k % 7) }], namedPorts: [{ name: 'http', protocol: 'TCP' }] };
}

/**
 * One label change of the event-to-enforced measurement: the remote pod `pod` of namespace `ns-(k % 50)` takes the
 * `app` label that policy k's first peer selects, then gets its own back. Policies k + 100 j select the same peers,
 * so the change touches every such policy there is: 5 of 500, 10 of 1,000.
 */
export function benchLabelChange(round: number, policyCount: number): { k: number; namespace: string; pod: string; ip: string; joined: string; own: string } {
  const k = (round * 37) % policyCount;
  const p = 10 + round * 2 + (k % APPS === (10 + round * 2) % APPS ? 1 : 0);
  const ip = benchPodIp(benchPodIndex(k % NAMESPACES, p)).v4;
  return { k, namespace: `ns-${k % NAMESPACES}`, pod: `pod-${p}`, ip, joined: `app-${k % APPS}`, own: `app-${p % APPS}` };
}

/** The label that only the probe policy (benchProbePolicy) selects peers by. */
export const BENCH_PROBE_LABEL = 'bench-probe';

/**
 * A policy of its own whose only peers are pods labelled `bench-probe: in`, in namespace ns-0: a pod taking that
 * label touches this policy alone, however many other policies there are. What "flat in unrelated policies" measures.
 */
export function benchProbePolicy(): Record<string, unknown> {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { namespace: 'ns-0', name: 'probe' },
    spec: {
      podSelector: { matchLabels: { tier: 'tier-0' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { [BENCH_PROBE_LABEL]: 'in' } } }], ports: [{ port: 80 }] }],
    },
  };
}

/**
 * Remote pods of ns-0 that no benchmark policy selects, as target or peer, before or after the probe label: odd
 * (tier-1 and tier-3 are not selected in ns-0) and of an app that no policy of ns-0 or of a team t-0 namespace
 * selector names (apps 0, 1, 2, 6, 10, 11 and 16 are).
 */
const PROBE_PODS = Array.from({ length: PODS }, (_, p) => p).filter((p) => p >= 13 && p % 2 === 1 && p % 20 !== 1 && p % 20 !== 11);

/**
 * The pod that stays in the probe policy's peers throughout (label it before the first sync): a policy whose peers
 * are all gone has no set at all, and the change measured must be an element added to a set already there.
 */
export function benchProbeAnchor(): { namespace: string; pod: string; labels: Record<string, string> } {
  return { namespace: 'ns-0', pod: `pod-${PROBE_PODS.at(-1) as number}`, labels: { [BENCH_PROBE_LABEL]: 'in' } };
}

/** The remote pod of ns-0 that round `round` labels into the probe policy's peers. */
export function benchProbeChange(round: number): { namespace: string; pod: string; ip: string } {
  const p = PROBE_PODS[round % (PROBE_PODS.length - 1)] as number;
  return { namespace: 'ns-0', pod: `pod-${p}`, ip: benchPodIp(benchPodIndex(0, p)).v4 };
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/** The nearest-rank percentile. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1))] as number;
}
