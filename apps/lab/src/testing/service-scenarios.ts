/**
 * Kubernetes' Services e2e scenarios (test/e2e/network/service.go, conntrack.go, networking.go, loadbalancer.go,
 * dual_stack.go), written against any cluster of lab nodes that kubectl reaches: Services and Pods through `kubectl
 * apply`, EndpointSlices read back with kubectl, real TCP and UDP from pod, node and external-router namespaces. The
 * lab's pods answer every connection on their container ports with `<namespace>/<name>`, as agnhost serve-hostname
 * answers with its pod's name. Each scenario works in a namespace of its own and deletes its objects at the end.
 * apps/lab/src/services-e2e.test.ts runs them against `npm start`; the IPVS guest can run the same list.
 */
import { expect } from 'vitest';
import { waitFor } from '@kube-router/testkit';
import { NetnsClient, type HelperLauncher, type Outcome, type ProbeRequest } from './netns-client.js';

/** Where the traffic of a scenario comes from, and how the cluster is reached. */
export interface ServiceLab {
  kubectl(...args: string[]): Promise<string>;
  kubectlApply(manifest: string): Promise<void>;
  /** Every node: its name, network namespace and InternalIPs (IPv4 first). */
  nodes: readonly { name: string; netns: string; addresses: readonly string[] }[];
  /** The external router's namespace and its addresses (IPv4 first), when the lab has one. */
  router?: { netns: string; addresses: readonly string[] };
  /** Where the namespaces are: the probing helpers start there (on this host by default; the QEMU guest's, say). */
  launchHelper?: HelperLauncher;
  /** How long a helper may take to start there (default 15 s). */
  helperStartTimeoutMs?: number;
  /** Checks the proxy under test cannot pass, each with the reason: the scenarios leave them out. */
  cannot?: {
    /** A pod on a node without a local endpoint reaching an externalTrafficPolicy Local LoadBalancer address. */
    localLoadBalancerFromPods?: string;
  };
}

export interface RunningPod {
  namespace: string;
  name: string;
  node: string;
  netns: string;
  ips: string[];
  /** What the pod's agent answers: `<namespace>/<name>`. */
  identity: string;
}

export interface PodSpec {
  name: string;
  node: string;
  labels?: Record<string, string>;
  ports?: readonly { port: number; protocol: 'TCP' | 'UDP'; name?: string }[];
}

interface ServiceObject {
  spec: {
    clusterIP: string;
    clusterIPs?: string[];
    ipFamilies?: string[];
    ports: { name?: string; port: number; nodePort?: number; protocol: string }[];
    healthCheckNodePort?: number;
  };
  status?: { loadBalancer?: { ingress?: { ip?: string }[] } };
}

/** A Kubernetes-style wait: generous for a loaded two-core machine, polling, never a fixed sleep. */
export const PROXY_LAG_MS = 60_000;
/** serve_hostname's port. */
const HOSTNAME_PORT = 9376;

/** The operations the scenarios share: pods, Services, EndpointSlices and probes, all through the lab's own interfaces. */
export class ServiceCluster {
  readonly #clients = new Map<string, Promise<NetnsClient>>();
  readonly #clientPods = new Map<string, Promise<RunningPod>>();

  constructor(readonly lab: ServiceLab) {}

  get nodes(): ServiceLab['nodes'] {
    return this.lab.nodes;
  }

  /** The lab's second node, where "another node" is asked for; the first when there is one only. */
  node(index: number): ServiceLab['nodes'][number] {
    return this.lab.nodes[Math.min(index, this.lab.nodes.length - 1)]!;
  }

  get dualStack(): boolean {
    return this.lab.nodes.every((node) => node.addresses.some((address) => address.includes(':')));
  }

  /** The helper in `netns`, started once. */
  client(netns: string): Promise<NetnsClient> {
    let client = this.#clients.get(netns);
    if (client === undefined) {
      client = NetnsClient.start(netns, this.lab.launchHelper, this.lab.helperStartTimeoutMs);
      this.#clients.set(netns, client);
      client.catch(() => this.#clients.delete(netns));
    }
    return client;
  }

  async closeClient(netns: string): Promise<void> {
    const client = this.#clients.get(netns);
    this.#clients.delete(netns);
    await (await client?.catch(() => undefined))?.close();
  }

  async close(): Promise<void> {
    await Promise.all([...this.#clients.keys()].map((netns) => this.closeClient(netns)));
  }

  /** A client pod on the node (an e2e exec pod), shared by every scenario: namespace e2e-clients, `client-<node>`. */
  clientPod(node: string): Promise<RunningPod> {
    let pod = this.#clientPods.get(node);
    if (pod === undefined) {
      pod = this.namespace('e2e-clients').then(async () => (await this.runPods('e2e-clients', [{ name: `client-${node}`, node }]))[0]!);
      this.#clientPods.set(node, pod);
      pod.catch(() => this.#clientPods.delete(node));
    }
    return pod;
  }

  async namespace(name: string): Promise<void> {
    await this.lab.kubectlApply(`apiVersion: v1\nkind: Namespace\nmetadata: { name: ${name} }\n`);
  }

  /** Creates the pods with kubectl and resolves once each runs, with its namespace and addresses. */
  async runPods(namespace: string, specs: readonly PodSpec[]): Promise<RunningPod[]> {
    await this.lab.kubectlApply(specs.map((spec) => podYaml(namespace, spec)).join('---\n'));
    let running: RunningPod[] = [];
    await waitFor(
      `pods ${specs.map((spec) => spec.name).join(', ')} in ${namespace} to run`,
      async () => {
        const items = await this.#pods(namespace);
        running = specs.flatMap((spec) => {
          const pod = items.find((item) => item.metadata.name === spec.name);
          const netns = pod?.metadata.annotations?.['lab.kube-router.io/netns'];
          if (pod?.status?.phase !== 'Running' || netns === undefined || !pod.status.podIPs?.length) return [];
          const ips = pod.status.podIPs.map((entry) => entry.ip);
          return [{ namespace, name: spec.name, node: pod.spec.nodeName, netns, ips, identity: `${namespace}/${spec.name}` }];
        });
        return running.length === specs.length;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
    return running;
  }

  /** Deletes the pods (their helpers first, which would keep a deleted namespace alive) and waits until they are gone. */
  async deletePods(pods: readonly RunningPod[]): Promise<void> {
    if (pods.length === 0) return;
    await Promise.all(pods.map((pod) => this.closeClient(pod.netns)));
    const namespace = pods[0]!.namespace;
    await this.lab.kubectl('delete', 'pod', '-n', namespace, '--wait=false', ...pods.map((pod) => pod.name));
    await waitFor(
      `pods ${pods.map((pod) => pod.name).join(', ')} to be deleted`,
      async () => {
        const names = new Set((await this.#pods(namespace)).map((pod) => pod.metadata.name));
        return pods.every((pod) => !names.has(pod.name));
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
  }

  /** Everything a scenario made in its namespace goes; its helpers first. */
  async cleanNamespace(namespace: string): Promise<void> {
    for (const pod of await this.#pods(namespace).catch(() => [])) {
      const netns = pod.metadata.annotations?.['lab.kube-router.io/netns'];
      if (netns !== undefined) await this.closeClient(netns);
    }
    await this.lab.kubectl('delete', 'pods,services', '--all', '-n', namespace, '--wait=false').catch(() => undefined);
  }

  async service(namespace: string, name: string): Promise<ServiceObject> {
    return JSON.parse(await this.lab.kubectl('get', 'service', name, '-n', namespace, '-o', 'json')) as ServiceObject;
  }

  /** The ready endpoints of a Service by pod name, each with its ports as `<port>/<protocol>`, sorted: from its EndpointSlices. */
  async endpointPorts(namespace: string, service: string): Promise<Record<string, string[]>> {
    type Slice = {
      addressType: string;
      ports?: { port?: number; protocol?: string }[];
      endpoints?: { targetRef?: { name?: string }; conditions?: { ready?: boolean } }[];
    };
    const slices = (
      JSON.parse(
        await this.lab.kubectl('get', 'endpointslices.discovery.k8s.io', '-n', namespace, '-l', `kubernetes.io/service-name=${service}`, '-o', 'json'),
      ) as { items: Slice[] }
    ).items;
    const byPod = new Map<string, Set<string>>();
    for (const slice of slices) {
      for (const endpoint of slice.endpoints ?? []) {
        if (endpoint.conditions?.ready === false) continue;
        const name = endpoint.targetRef?.name ?? '?';
        const ports = byPod.get(name) ?? new Set<string>();
        for (const port of slice.ports ?? []) ports.add(`${port.port}/${port.protocol ?? 'TCP'}`);
        byPod.set(name, ports);
      }
    }
    return Object.fromEntries([...byPod].sort(([a], [b]) => a.localeCompare(b)).map(([name, ports]) => [name, [...ports].sort()]));
  }

  /** e2e's validateEndpointsPortsOrFail: the Service's EndpointSlices name exactly these pods and ports. */
  async waitForEndpoints(namespace: string, service: string, expected: Record<string, string[]>): Promise<void> {
    const want = JSON.stringify(Object.fromEntries(Object.entries(expected).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => [k, [...v].sort()])));
    await waitFor(
      `the EndpointSlices of ${namespace}/${service} to be ${want}`,
      async () => {
        const got = JSON.stringify(await this.endpointPorts(namespace, service));
        if (got !== want) throw new Error(`they are ${got}`);
        return true;
      },
      { timeoutMs: PROXY_LAG_MS, intervalMs: 500 },
    );
  }

  /** The Service's LoadBalancer ingress addresses, once it has `count` of them. */
  async waitForIngress(namespace: string, name: string, count: number): Promise<string[]> {
    let ips: string[] = [];
    await waitFor(
      `${namespace}/${name} to get ${count} LoadBalancer address(es)`,
      async () => {
        ips = ((await this.service(namespace, name)).status?.loadBalancer?.ingress ?? []).flatMap((entry) => (entry.ip ? [entry.ip] : []));
        return ips.length >= count;
      },
      { timeoutMs: PROXY_LAG_MS, intervalMs: 500 },
    );
    return ips;
  }

  /**
   * verifyServeHostnameServiceUp: bursts of requests from `netns` until every expected answer has come, none but
   * those, and the last burst had no failure. An unexpected answer (an endpoint that is gone) starts the count over.
   */
  async waitForAnswers(from: string, request: ProbeRequest, expected: readonly string[], timeoutMs = PROXY_LAG_MS): Promise<number> {
    const client = await this.client(from);
    const seen = new Set<string>();
    return waitFor(
      `${request.protocol} ${hostPort(request.host, request.port)} from ${from} to answer ${expected.join(', ')}`,
      async () => {
        const outcomes = await client.probe({ count: Math.max(6, 4 * expected.length), ...request });
        const replies = outcomes.flatMap((outcome) => (outcome.ok ? [outcome.reply ?? ''] : []));
        if (replies.some((reply) => !expected.includes(reply))) seen.clear();
        else for (const reply of replies) seen.add(reply);
        if (expected.every((reply) => seen.has(reply)) && outcomes.every((outcome) => outcome.ok)) return true;
        throw new Error(`last burst: ${summary(outcomes)}`);
      },
      { timeoutMs, intervalMs: 300 },
    );
  }

  /** Until `count` requests in a row all fail (no answer of any kind): the path is closed. Resolves with them. */
  async waitForNoAnswer(from: string, request: ProbeRequest, timeoutMs = PROXY_LAG_MS): Promise<Outcome[]> {
    const client = await this.client(from);
    let last: Outcome[] = [];
    await waitFor(
      `${request.protocol} ${hostPort(request.host, request.port)} from ${from} to answer nothing`,
      async () => {
        last = await client.probe({ count: 4, ...request });
        if (last.every((outcome) => !outcome.ok)) return true;
        throw new Error(`last burst: ${summary(last)}`);
      },
      { timeoutMs, intervalMs: 300 },
    );
    return last;
  }

  /** Until one request meets `check`; resolves with it. */
  async waitForOutcome(from: string, request: ProbeRequest, what: string, check: (outcome: Outcome) => boolean, timeoutMs = PROXY_LAG_MS): Promise<Outcome> {
    const client = await this.client(from);
    let last: Outcome | undefined;
    await waitFor(
      `${request.protocol} ${hostPort(request.host, request.port)} from ${from}: ${what}`,
      async () => {
        last = (await client.probe({ ...request, count: 1 }))[0]!;
        if (check(last)) return true;
        throw new Error(`last: ${summary([last])}`);
      },
      { timeoutMs, intervalMs: 300 },
    );
    return last!;
  }

  async #pods(namespace: string): Promise<
    {
      metadata: { name: string; annotations?: Record<string, string> };
      spec: { nodeName: string };
      status?: { phase?: string; podIPs?: { ip: string }[] };
    }[]
  > {
    return (JSON.parse(await this.lab.kubectl('get', 'pods', '-n', namespace, '-o', 'json')) as { items: never[] }).items;
  }
}

function podYaml(namespace: string, spec: PodSpec): string {
  const labels = Object.entries(spec.labels ?? {}).map(([key, value]) => `${key}: ${JSON.stringify(value)}`);
  const ports = (spec.ports ?? []).map(
    (port) => `        - { containerPort: ${port.port}, protocol: ${port.protocol}${port.name ? `, name: ${port.name}` : ''} }\n`,
  );
  return `apiVersion: v1
kind: Pod
metadata: { name: ${spec.name}, namespace: ${namespace}, labels: { ${labels.join(', ')} } }
spec:
  nodeName: ${spec.node}
  containers:
    - name: agnhost
      image: registry.k8s.io/e2e-test-images/agnhost:2.53
${ports.length > 0 ? `      ports:\n${ports.join('')}` : ''}`;
}

/** Once one check of a group has passed (the Service is programmed), how long each of the others may take. */
const SETTLED_MS = 20_000;

/**
 * Runs every check, one after another, and fails with all that failed (and how many passed): one broken path must not
 * hide the state of the others. Each check gets its time budget: PROXY_LAG_MS until one has passed, SETTLED_MS after.
 */
export async function allOf(checks: readonly (readonly [string, (timeoutMs: number) => Promise<unknown>])[]): Promise<void> {
  const failures: string[] = [];
  let settled = false;
  for (const [label, check] of checks) {
    try {
      await check(settled ? SETTLED_MS : PROXY_LAG_MS);
      settled = true;
    } catch (error) {
      failures.push(`${label}: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  if (failures.length > 0) throw new Error(`${failures.length} of ${checks.length} checks failed:\n  ${failures.join('\n  ')}`);
}

export function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

function summary(outcomes: readonly Outcome[]): string {
  const counts = new Map<string, number>();
  for (const outcome of outcomes) {
    const key = outcome.ok ? (outcome.reply ?? 'ok') : `${outcome.error ?? 'failed'}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].map(([key, count]) => `${count}x ${key}`).join(', ');
}

const ipv4 = (addresses: readonly string[]): string => addresses.find((address) => !address.includes(':'))!;
const ipv6 = (addresses: readonly string[]): string | undefined => addresses.find((address) => address.includes(':'));

/** Serve-hostname pods on the given nodes, each serving TCP and UDP on 9376. */
function hostnamePods(names: readonly [string, string][], labels: Record<string, string>, protocols: readonly ('TCP' | 'UDP')[] = ['TCP', 'UDP']): PodSpec[] {
  return names.map(([name, node]) => ({ name, node, labels, ports: protocols.map((protocol) => ({ port: HOSTNAME_PORT, protocol })) }));
}

function hostnameService(namespace: string, name: string, selector: Record<string, string>, extra = '', protocols: readonly ('TCP' | 'UDP')[] = ['TCP', 'UDP']): string {
  const ports = protocols.map((protocol) => `    - { name: ${protocol.toLowerCase()}, port: 80, targetPort: ${HOSTNAME_PORT}, protocol: ${protocol} }`).join('\n');
  const labels = Object.entries(selector).map(([key, value]) => `${key}: ${JSON.stringify(value)}`);
  return `apiVersion: v1
kind: Service
metadata: { name: ${name}, namespace: ${namespace} }
spec:
  selector: { ${labels.join(', ')} }
${extra}  ports:
${ports}
`;
}

const bothPorts = [`${HOSTNAME_PORT}/TCP`, `${HOSTNAME_PORT}/UDP`];

export interface ServiceScenario {
  /** The upstream test this ports, as Kubernetes names it. */
  e2e: string;
  /** Its file under test/e2e/network/. */
  file: 'service.go' | 'conntrack.go' | 'networking.go' | 'loadbalancer.go' | 'dual_stack.go';
  /** What the lab checks, one line. */
  checks: string;
  /** The namespace it works in. */
  namespace: string;
  needs?: readonly ('router' | 'dualStack')[];
  timeoutMs: number;
  run(cluster: ServiceCluster, namespace: string): Promise<void>;
}

/**
 * Runs one scenario as the e2e files do: in a namespace of its own (deleted afterwards, pass or fail), its time
 * added to `timings`; on a failure `explain` prints what the cluster's agents said before the error goes on.
 */
export async function runScenario(cluster: ServiceCluster, scenario: ServiceScenario, timings: string[], explain: (namespace: string) => Promise<void> | void): Promise<void> {
  const started = Date.now();
  const ns = scenario.namespace;
  try {
    if (ns !== 'default') await cluster.namespace(ns);
    await scenario.run(cluster, ns);
    timings.push(`passed in ${((Date.now() - started) / 1000).toFixed(1)} s: ${scenario.e2e}`);
  } catch (error) {
    timings.push(`FAILED after ${((Date.now() - started) / 1000).toFixed(1)} s: ${scenario.e2e}`);
    await explain(ns);
    throw error;
  } finally {
    if (ns !== 'default') await cluster.cleanNamespace(ns);
  }
}

export const SERVICE_SCENARIOS: readonly ServiceScenario[] = [
  {
    e2e: 'should serve a basic endpoint from pods; Granular Checks: Services should function for pod-Service and node-Service: http, udp',
    file: 'service.go',
    checks: 'a ClusterIP answers with every endpoint, TCP and UDP on the same port, from a pod and from the node on each node',
    namespace: 'e2e-basic',
    timeoutMs: 240_000,
    async run(cluster, ns) {
      const labels = { name: 'svc-hostname' };
      const pods = await cluster.runPods(ns, hostnamePods([['hostname-1', cluster.node(0).name], ['hostname-2', cluster.node(1).name]], labels));
      await cluster.lab.kubectlApply(hostnameService(ns, 'svc-hostname', labels));
      await cluster.waitForEndpoints(ns, 'svc-hostname', { 'hostname-1': bothPorts, 'hostname-2': bothPorts });
      const { spec } = await cluster.service(ns, 'svc-hostname');
      const expected = pods.map((pod) => pod.identity);
      const sources = [
        ...(await Promise.all(cluster.nodes.map(async (node) => (await cluster.clientPod(node.name)).netns))),
        ...cluster.nodes.map((node) => node.netns),
      ];
      await allOf(
        sources.flatMap((from) =>
          (['TCP', 'UDP'] as const).map((protocol) => [`${protocol} from ${from}`, (t: number) => cluster.waitForAnswers(from, { protocol, host: spec.clusterIP, port: 80 }, expected, t)] as const),
        ),
      );
    },
  },
  {
    e2e: 'should be rejected when no endpoints exist',
    file: 'service.go',
    checks: 'a ClusterIP without endpoints refuses TCP and UDP at once (ICMP unreachable / reset), never a black hole',
    namespace: 'e2e-no-endpoints',
    timeoutMs: 150_000,
    async run(cluster, ns) {
      await cluster.lab.kubectlApply(hostnameService(ns, 'no-pods', { name: 'nobody' }));
      const { spec } = await cluster.service(ns, 'no-pods');
      const client = (await cluster.clientPod(cluster.node(0).name)).netns;
      for (const protocol of ['TCP', 'UDP'] as const) {
        // Rejected, not dropped: the answer comes in well under the client's timeout. A SYN sent before the proxy
        // programmed the Service is retransmitted and refused a second or three later: only a fast refusal counts.
        await cluster.waitForOutcome(
          client,
          { protocol, host: spec.clusterIP, port: 80, timeoutMs: 5_000 },
          'refused within 2 s',
          (o) => o.error === 'ECONNREFUSED' && o.ms < 2_000,
        );
      }
    },
  },
  {
    e2e: 'should serve multiport endpoints from pods',
    file: 'service.go',
    checks: 'two ports to two pods: EndpointSlices and traffic follow pods created and deleted',
    namespace: 'e2e-multiport',
    timeoutMs: 240_000,
    async run(cluster, ns) {
      const labels = { app: 'multi-endpoint-test' };
      await cluster.lab.kubectlApply(`apiVersion: v1
kind: Service
metadata: { name: multi-endpoint-test, namespace: ${ns} }
spec:
  selector: { app: multi-endpoint-test }
  ports:
    - { name: portname1, port: 80, targetPort: svc1 }
    - { name: portname2, port: 81, targetPort: svc2 }
`);
      await cluster.waitForEndpoints(ns, 'multi-endpoint-test', {});
      const { spec } = await cluster.service(ns, 'multi-endpoint-test');
      const client = (await cluster.clientPod(cluster.node(0).name)).netns;
      const [pod1] = await cluster.runPods(ns, [{ name: 'pod1', node: cluster.node(0).name, labels, ports: [{ port: 100, protocol: 'TCP', name: 'svc1' }] }]);
      await cluster.waitForEndpoints(ns, 'multi-endpoint-test', { pod1: ['100/TCP'] });
      const [pod2] = await cluster.runPods(ns, [{ name: 'pod2', node: cluster.node(1).name, labels, ports: [{ port: 101, protocol: 'TCP', name: 'svc2' }] }]);
      await cluster.waitForEndpoints(ns, 'multi-endpoint-test', { pod1: ['100/TCP'], pod2: ['101/TCP'] });
      await cluster.waitForAnswers(client, { protocol: 'TCP', host: spec.clusterIP, port: 80 }, [pod1!.identity]);
      await cluster.waitForAnswers(client, { protocol: 'TCP', host: spec.clusterIP, port: 81 }, [pod2!.identity]);
      await cluster.deletePods([pod1!]);
      await cluster.waitForEndpoints(ns, 'multi-endpoint-test', { pod2: ['101/TCP'] });
      await cluster.waitForOutcome(client, { protocol: 'TCP', host: spec.clusterIP, port: 80 }, 'refused once pod1 is gone', (o) => o.error === 'ECONNREFUSED');
      await cluster.waitForAnswers(client, { protocol: 'TCP', host: spec.clusterIP, port: 81 }, [pod2!.identity]);
      await cluster.deletePods([pod2!]);
      await cluster.waitForEndpoints(ns, 'multi-endpoint-test', {});
    },
  },
  {
    e2e: 'Granular Checks: Services should update endpoints: http, udp',
    file: 'networking.go',
    checks: 'an endpoint deleted stops getting traffic, one added starts, TCP and UDP',
    namespace: 'e2e-update-endpoints',
    timeoutMs: 240_000,
    async run(cluster, ns) {
      const labels = { app: 'update' };
      const [a, b] = await cluster.runPods(ns, hostnamePods([['a', cluster.node(0).name], ['b', cluster.node(1).name]], labels));
      await cluster.lab.kubectlApply(hostnameService(ns, 'update', labels));
      await cluster.waitForEndpoints(ns, 'update', { a: bothPorts, b: bothPorts });
      const { spec } = await cluster.service(ns, 'update');
      const client = (await cluster.clientPod(cluster.node(0).name)).netns;
      for (const protocol of ['TCP', 'UDP'] as const) await cluster.waitForAnswers(client, { protocol, host: spec.clusterIP, port: 80 }, [a!.identity, b!.identity]);
      await cluster.deletePods([a!]);
      await cluster.waitForEndpoints(ns, 'update', { b: bothPorts });
      for (const protocol of ['TCP', 'UDP'] as const) await cluster.waitForAnswers(client, { protocol, host: spec.clusterIP, port: 80 }, [b!.identity]);
      const [c] = await cluster.runPods(ns, hostnamePods([['c', cluster.node(0).name]], labels));
      await cluster.waitForEndpoints(ns, 'update', { b: bothPorts, c: bothPorts });
      for (const protocol of ['TCP', 'UDP'] as const) await cluster.waitForAnswers(client, { protocol, host: spec.clusterIP, port: 80 }, [b!.identity, c!.identity]);
    },
  },
  {
    e2e: 'should be able to up and down services; should work after the service has been recreated',
    file: 'service.go',
    checks: 'a deleted Service stops answering while another keeps answering; a new one and a recreated one answer',
    namespace: 'e2e-up-down',
    timeoutMs: 240_000,
    async run(cluster, ns) {
      const pods = await cluster.runPods(ns, [
        ...hostnamePods([['up-down-1-a', cluster.node(0).name]], { app: 'up-down-1' }, ['TCP']),
        ...hostnamePods([['up-down-2-a', cluster.node(1).name]], { app: 'up-down-2' }, ['TCP']),
        ...hostnamePods([['up-down-3-a', cluster.node(1).name]], { app: 'up-down-3' }, ['TCP']),
      ]);
      const client = (await cluster.clientPod(cluster.node(0).name)).netns;
      const up = async (index: number) => {
        await cluster.lab.kubectlApply(hostnameService(ns, `up-down-${index}`, { app: `up-down-${index}` }, '', ['TCP']));
        const ip = (await cluster.service(ns, `up-down-${index}`)).spec.clusterIP;
        await cluster.waitForAnswers(client, { protocol: 'TCP', host: ip, port: 80 }, [pods[index - 1]!.identity]);
        return ip;
      };
      const first = await up(1);
      const second = await up(2);
      await cluster.lab.kubectl('delete', 'service', 'up-down-1', '-n', ns);
      await cluster.waitForNoAnswer(client, { protocol: 'TCP', host: first, port: 80 });
      await cluster.waitForAnswers(client, { protocol: 'TCP', host: second, port: 80 }, [pods[1]!.identity]);
      await up(3);
      // Recreated under the same name: a new ClusterIP that answers, the old one does not.
      await cluster.lab.kubectl('delete', 'service', 'up-down-2', '-n', ns);
      await cluster.waitForNoAnswer(client, { protocol: 'TCP', host: second, port: 80 });
      await up(2);
    },
  },
  {
    e2e: 'should be updated after adding or deleting ports',
    file: 'service.go',
    checks: 'a port added to a Service answers, a port removed stops',
    namespace: 'e2e-ports',
    timeoutMs: 180_000,
    async run(cluster, ns) {
      const labels = { app: 'ports' };
      const [pod] = await cluster.runPods(ns, hostnamePods([['ports-1', cluster.node(1).name]], labels));
      const client = (await cluster.clientPod(cluster.node(0).name)).netns;
      await cluster.lab.kubectlApply(hostnameService(ns, 'ports', labels, '', ['TCP']));
      const ip = (await cluster.service(ns, 'ports')).spec.clusterIP;
      await cluster.waitForAnswers(client, { protocol: 'TCP', host: ip, port: 80 }, [pod!.identity]);
      const both = `apiVersion: v1
kind: Service
metadata: { name: ports, namespace: ${ns} }
spec:
  selector: { app: ports }
  ports:
PORTS`;
      await cluster.lab.kubectlApply(
        both.replace('PORTS', `    - { name: tcp-port, port: 80, targetPort: ${HOSTNAME_PORT}, protocol: TCP }\n    - { name: udp-port, port: 81, targetPort: ${HOSTNAME_PORT}, protocol: UDP }\n`),
      );
      await cluster.waitForAnswers(client, { protocol: 'UDP', host: ip, port: 81 }, [pod!.identity]);
      await cluster.lab.kubectlApply(both.replace('PORTS', `    - { name: udp-port, port: 81, targetPort: ${HOSTNAME_PORT}, protocol: UDP }\n`));
      await cluster.waitForNoAnswer(client, { protocol: 'TCP', host: ip, port: 80 });
      await cluster.waitForAnswers(client, { protocol: 'UDP', host: ip, port: 81 }, [pod!.identity]);
    },
  },
  {
    e2e: 'should be able to create a functioning NodePort service; should support basic nodePort: udp functionality; Granular Checks: Services should function for node-Service',
    file: 'service.go',
    checks: "the external router reaches a NodePort on every node's address, both families, TCP and UDP; each node reaches its own",
    namespace: 'e2e-nodeport',
    needs: ['router'],
    timeoutMs: 300_000,
    async run(cluster, ns) {
      const labels = { app: 'nodeport-test' };
      const pods = await cluster.runPods(ns, hostnamePods([['np-1', cluster.node(0).name], ['np-2', cluster.node(1).name]], labels));
      // Dual-stack where the lab is: a NodePort of an IPv4-only Service is on the nodes' IPv4 addresses only.
      await cluster.lab.kubectlApply(hostnameService(ns, 'nodeport-test', labels, `  type: NodePort\n${cluster.dualStack ? '  ipFamilyPolicy: PreferDualStack\n' : ''}`));
      await cluster.waitForEndpoints(ns, 'nodeport-test', { 'np-1': bothPorts, 'np-2': bothPorts });
      const { spec } = await cluster.service(ns, 'nodeport-test');
      const expected = pods.map((pod) => pod.identity);
      const router = cluster.lab.router!.netns;
      for (const port of spec.ports) expect(port.nodePort, `${port.name} nodePort`).toBeGreaterThanOrEqual(30000);
      await allOf(
        spec.ports.flatMap((port) => {
          const request = (host: string) => ({ protocol: port.protocol as 'TCP' | 'UDP', host, port: port.nodePort! });
          return cluster.nodes.flatMap((node) => [
            ...node.addresses.map((address) => [`${port.protocol} router to ${hostPort(address, port.nodePort!)}`, (t: number) => cluster.waitForAnswers(router, request(address), expected, t)] as const),
            [`${port.protocol} ${node.name} to its own ${ipv4(node.addresses)}`, (t: number) => cluster.waitForAnswers(node.netns, request(ipv4(node.addresses)), expected, t)] as const,
          ]);
        }),
      );
    },
  },
  {
    e2e: 'should be able to change the type and ports of a TCP service (LoadBalancer part); ESIPP [Slow] should work for type=LoadBalancer (Cluster)',
    file: 'loadbalancer.go',
    checks: 'the external router reaches the LoadBalancer addresses (both families) and gets answers from every endpoint',
    namespace: 'e2e-loadbalancer',
    needs: ['router'],
    timeoutMs: 240_000,
    async run(cluster, ns) {
      const labels = { app: 'lb-test' };
      const pods = await cluster.runPods(ns, hostnamePods([['lb-1', cluster.node(0).name], ['lb-2', cluster.node(1).name]], labels));
      const families = cluster.dualStack ? '  ipFamilyPolicy: PreferDualStack\n' : '';
      await cluster.lab.kubectlApply(hostnameService(ns, 'lb-test', labels, `  type: LoadBalancer\n${families}`));
      await cluster.waitForEndpoints(ns, 'lb-test', { 'lb-1': bothPorts, 'lb-2': bothPorts });
      const ingress = await cluster.waitForIngress(ns, 'lb-test', cluster.dualStack ? 2 : 1);
      const expected = pods.map((pod) => pod.identity);
      await allOf(
        ingress.flatMap((ip) =>
          (['TCP', 'UDP'] as const).map(
            (protocol) => [`${protocol} router to ${hostPort(ip, 80)}`, (t: number) => cluster.waitForAnswers(cluster.lab.router!.netns, { protocol, host: ip, port: 80 }, expected, t)] as const,
          ),
        ),
      );
    },
  },
  {
    e2e: 'should only allow access from service loadbalancer source ranges [Slow]',
    file: 'loadbalancer.go',
    checks: 'loadBalancerSourceRanges without the router keeps it out of the LoadBalancer address; with its /32 it gets in',
    namespace: 'e2e-source-ranges',
    needs: ['router'],
    timeoutMs: 240_000,
    async run(cluster, ns) {
      const labels = { app: 'lb-sourcerange' };
      const [pod] = await cluster.runPods(ns, hostnamePods([['sr-1', cluster.node(0).name]], labels, ['TCP']));
      const withRanges = (range: string) => hostnameService(ns, 'lb-sourcerange', labels, `  type: LoadBalancer\n  loadBalancerSourceRanges: [${range}]\n`, ['TCP']);
      const router = cluster.lab.router!;
      await cluster.lab.kubectlApply(withRanges('192.0.2.0/24'));
      const [ip] = await cluster.waitForIngress(ns, 'lb-sourcerange', 1);
      await cluster.waitForEndpoints(ns, 'lb-sourcerange', { 'sr-1': [`${HOSTNAME_PORT}/TCP`] });
      // Allowed first, to know the path is programmed; then closed by the range, then open again.
      await cluster.lab.kubectlApply(withRanges(`${ipv4(router.addresses)}/32`));
      await cluster.waitForAnswers(router.netns, { protocol: 'TCP', host: ip!, port: 80 }, [pod!.identity]);
      await cluster.lab.kubectlApply(withRanges('192.0.2.0/24'));
      await cluster.waitForNoAnswer(router.netns, { protocol: 'TCP', host: ip!, port: 80 });
      await cluster.lab.kubectlApply(withRanges(`${ipv4(router.addresses)}/32`));
      await cluster.waitForAnswers(router.netns, { protocol: 'TCP', host: ip!, port: 80 }, [pod!.identity]);
    },
  },
  {
    e2e: 'should have session affinity work for service with type clusterIP; should be able to switch session affinity for service with type clusterIP; ... for NodePort service',
    file: 'service.go',
    checks: 'sessionAffinity ClientIP: 15 requests in a row reach one endpoint (pod to ClusterIP, router to NodePort); None spreads them again',
    namespace: 'e2e-affinity',
    timeoutMs: 300_000,
    async run(cluster, ns) {
      const labels = { app: 'affinity' };
      const pods = await cluster.runPods(
        ns,
        hostnamePods([['affinity-1', cluster.node(0).name], ['affinity-2', cluster.node(1).name], ['affinity-3', cluster.node(1).name]], labels, ['TCP']),
      );
      const service = (affinity: string) => hostnameService(ns, 'affinity', labels, `  type: NodePort\n  sessionAffinity: ${affinity}\n`, ['TCP']);
      await cluster.lab.kubectlApply(service('None'));
      await cluster.waitForEndpoints(ns, 'affinity', Object.fromEntries(pods.map((pod) => [pod.name, [`${HOSTNAME_PORT}/TCP`]])));
      const { spec } = await cluster.service(ns, 'affinity');
      const client = (await cluster.clientPod(cluster.node(0).name)).netns;
      const clusterIp = { protocol: 'TCP' as const, host: spec.clusterIP, port: 80 };
      const expected = pods.map((pod) => pod.identity);
      await cluster.waitForAnswers(client, clusterIp, expected);
      // checkAffinity: AffinityConfirmCount (15) answers in a row from one host.
      const holds = async (from: string, request: ProbeRequest) => {
        let hosts: string[] = [];
        await waitFor(
          `15 answers in a row from one endpoint, ${from} to ${hostPort(request.host, request.port)}`,
          async () => {
            hosts = (await (await cluster.client(from)).probe({ ...request, count: 15 })).map((outcome) => outcome.reply ?? outcome.error ?? '');
            if (new Set(hosts).size === 1 && expected.includes(hosts[0]!)) return true;
            throw new Error(`answers: ${hosts.join(', ')}`);
          },
          { timeoutMs: PROXY_LAG_MS, intervalMs: 500 },
        );
      };
      await cluster.lab.kubectlApply(service('ClientIP'));
      await holds(client, clusterIp);
      if (cluster.lab.router) await holds(cluster.lab.router.netns, { protocol: 'TCP', host: ipv4(cluster.node(0).addresses), port: spec.ports[0]!.nodePort! });
      await cluster.lab.kubectlApply(service('None'));
      await cluster.waitForAnswers(client, clusterIp, expected);
      await cluster.lab.kubectlApply(service('ClientIP'));
      await holds(client, clusterIp);
    },
  },
  {
    e2e: 'ESIPP [Slow] should work for type=NodePort; should only target nodes with endpoints; should work for type=LoadBalancer; should work from pods; should handle updates to ExternalTrafficPolicy field',
    file: 'loadbalancer.go',
    checks: "externalTrafficPolicy Local: the router's requests reach only the node with the endpoint, which sees the router's address; Cluster again opens every node",
    namespace: 'e2e-etp-local',
    needs: ['router'],
    timeoutMs: 300_000,
    async run(cluster, ns) {
      const labels = { app: 'external-local' };
      const [pod] = await cluster.runPods(ns, [{ name: 'local-1', node: cluster.node(0).name, labels }]);
      // The pod's server answers with the client address it sees: agnhost netexec's /clientip.
      await (await cluster.client(pod!.netns)).serve('TCP', 8081, pod!.identity);
      const service = (policy: string) => `apiVersion: v1
kind: Service
metadata: { name: external-local, namespace: ${ns} }
spec:
  type: LoadBalancer
  externalTrafficPolicy: ${policy}
  selector: { app: external-local }
  ports: [{ name: http, port: 80, targetPort: 8081, protocol: TCP }]
`;
      await cluster.lab.kubectlApply(service('Local'));
      await cluster.waitForEndpoints(ns, 'external-local', { 'local-1': ['8081/TCP'] });
      const { spec } = await cluster.service(ns, 'external-local');
      const [lbIp] = await cluster.waitForIngress(ns, 'external-local', 1);
      const nodePort = spec.ports[0]!.nodePort!;
      const router = cluster.lab.router!;
      const routerSeen = `${pod!.identity} ${ipv4(router.addresses)}`;
      const [withEndpoint, without] = [cluster.node(0), cluster.node(1)];
      await cluster.waitForAnswers(router.netns, { protocol: 'TCP', host: ipv4(withEndpoint.addresses), port: nodePort }, [routerSeen]);
      if (without !== withEndpoint) await cluster.waitForNoAnswer(router.netns, { protocol: 'TCP', host: ipv4(without.addresses), port: nodePort });
      await cluster.waitForAnswers(router.netns, { protocol: 'TCP', host: lbIp!, port: 80 }, [routerSeen]);
      // From a pod on the other node, the LoadBalancer address is served as Cluster, and the pod's address kept.
      if (cluster.lab.cannot?.localLoadBalancerFromPods === undefined) {
        const client = await cluster.clientPod(without.name);
        await cluster.waitForAnswers(client.netns, { protocol: 'TCP', host: lbIp!, port: 80 }, [`${pod!.identity} ${ipv4(client.ips)}`]);
      }
      await cluster.lab.kubectlApply(service('Cluster'));
      await cluster.waitForOutcome(router.netns, { protocol: 'TCP', host: ipv4(without.addresses), port: nodePort }, 'answered once Cluster', (o) => o.ok);
    },
  },
  {
    e2e: 'should respect internalTrafficPolicy=Local Pod to Pod; Pod (hostNetwork: true) to Pod',
    file: 'service.go',
    checks: 'internalTrafficPolicy Local: pods and the node on the endpoint’s node reach it; on the other node nothing answers',
    namespace: 'e2e-itp-local',
    timeoutMs: 240_000,
    async run(cluster, ns) {
      const labels = { app: 'itp-local' };
      const [pod] = await cluster.runPods(ns, hostnamePods([['itp-1', cluster.node(0).name]], labels));
      await cluster.lab.kubectlApply(hostnameService(ns, 'itp-local', labels, '  internalTrafficPolicy: Local\n'));
      await cluster.waitForEndpoints(ns, 'itp-local', { 'itp-1': bothPorts });
      const { spec } = await cluster.service(ns, 'itp-local');
      const local = [(await cluster.clientPod(cluster.node(0).name)).netns, cluster.node(0).netns];
      const remote = [(await cluster.clientPod(cluster.node(1).name)).netns, cluster.node(1).netns];
      await allOf(
        (['TCP', 'UDP'] as const).flatMap((protocol) => {
          const request = { protocol, host: spec.clusterIP, port: 80 };
          return [
            ...local.map((from) => [`${protocol} answered from ${from}`, (t: number) => cluster.waitForAnswers(from, request, [pod!.identity], t)] as const),
            ...(cluster.nodes.length > 1 ? remote : []).map((from) => [`${protocol} unanswered from ${from}`, (t: number) => cluster.waitForNoAnswer(from, request, t)] as const),
          ];
        }),
      );
    },
  },
  ...(['ClusterIP', 'NodePort'] as const).map(
    (type): ServiceScenario => ({
      e2e: `should be able to preserve UDP traffic when server pod cycles for a ${type} service`,
      file: 'conntrack.go',
      checks: `a UDP client that keeps sending from one port to a ${type} follows the backend replaced under it (stale conntrack entries go)`,
      namespace: `e2e-conntrack-${type.toLowerCase()}`,
      ...(type === 'NodePort' && { needs: ['router'] as const }),
      timeoutMs: 240_000,
      async run(cluster, ns) {
        const labels = { app: 'svc-udp' };
        await cluster.lab.kubectlApply(`apiVersion: v1
kind: Service
metadata: { name: svc-udp, namespace: ${ns} }
spec:
  type: ${type}
  selector: { app: svc-udp }
  ports: [{ name: udp, port: 80, targetPort: 80, protocol: UDP }]
`);
        const { spec } = await cluster.service(ns, 'svc-udp');
        const [clientNode, serverNode] = [cluster.node(0), cluster.node(1)];
        const client = await cluster.clientPod(clientNode.name);
        const [host, port] = type === 'ClusterIP' ? [spec.clusterIP, 80] : [ipv4(serverNode.addresses), spec.ports[0]!.nodePort!];
        // conntrack.go: `nc -u -p 12345` in a loop, one source port for the whole test.
        const stream = await (await cluster.client(client.netns)).udpStream(host, port, type === 'ClusterIP' ? 12345 : 12346, 500);
        try {
          const server = (name: string) => ({ name, node: serverNode.name, labels, ports: [{ port: 80, protocol: 'UDP' as const }] });
          const [backend1] = await cluster.runPods(ns, [server('pod-server-1')]);
          await cluster.waitForEndpoints(ns, 'svc-udp', { 'pod-server-1': ['80/UDP'] });
          await waitFor(`the UDP client to reach ${backend1!.identity}`, () => stream.replies.some((r) => r.reply === backend1!.identity), { timeoutMs: PROXY_LAG_MS, intervalMs: 250 });
          const [backend2] = await cluster.runPods(ns, [server('pod-server-2')]);
          await cluster.deletePods([backend1!]);
          await cluster.waitForEndpoints(ns, 'svc-udp', { 'pod-server-2': ['80/UDP'] });
          await waitFor(
            `the UDP client, still sending from its port, to reach ${backend2!.identity}`,
            () => stream.replies.some((r) => r.reply === backend2!.identity),
            { timeoutMs: PROXY_LAG_MS, intervalMs: 250 },
          );
        } finally {
          await stream.stop();
        }
      },
    }),
  ),
  {
    e2e: 'should allow pods to hairpin back to themselves through services',
    file: 'service.go',
    checks: 'a pod reaches itself through its own Service’s ClusterIP',
    namespace: 'e2e-hairpin',
    timeoutMs: 180_000,
    async run(cluster, ns) {
      const labels = { name: 'hairpin-test' };
      const [pod] = await cluster.runPods(ns, [{ name: 'hairpin', node: cluster.node(0).name, labels, ports: [{ port: 8080, protocol: 'TCP' }] }]);
      await cluster.lab.kubectlApply(`apiVersion: v1
kind: Service
metadata: { name: hairpin-test, namespace: ${ns} }
spec:
  selector: { name: hairpin-test }
  ports: [{ port: 8080, targetPort: 8080, protocol: TCP }]
`);
      await cluster.waitForEndpoints(ns, 'hairpin-test', { hairpin: ['8080/TCP'] });
      const { spec } = await cluster.service(ns, 'hairpin-test');
      await cluster.waitForAnswers(pod!.netns, { protocol: 'TCP', host: spec.clusterIP, port: 8080 }, [pod!.identity]);
    },
  },
  {
    e2e: 'should preserve source pod IP for traffic thru service cluster IP [LinuxOnly]',
    file: 'service.go',
    checks: 'the endpoint sees the client pod’s own address through a ClusterIP, from either node',
    namespace: 'e2e-source-ip',
    timeoutMs: 180_000,
    async run(cluster, ns) {
      const [pod] = await cluster.runPods(ns, [{ name: 'echo-sourceip', node: cluster.node(0).name, labels: { app: 'sourceip' } }]);
      await (await cluster.client(pod!.netns)).serve('TCP', 8080, pod!.identity);
      await cluster.lab.kubectlApply(`apiVersion: v1
kind: Service
metadata: { name: sourceip-test, namespace: ${ns} }
spec:
  selector: { app: sourceip }
  ports: [{ port: 8080, targetPort: 8080, protocol: TCP }]
`);
      await cluster.waitForEndpoints(ns, 'sourceip-test', { 'echo-sourceip': ['8080/TCP'] });
      const { spec } = await cluster.service(ns, 'sourceip-test');
      for (const node of cluster.nodes) {
        const client = await cluster.clientPod(node.name);
        await cluster.waitForAnswers(client.netns, { protocol: 'TCP', host: spec.clusterIP, port: 8080 }, [`${pod!.identity} ${ipv4(client.ips)}`]);
      }
    },
  },
  {
    e2e: '[Feature:IPv6DualStack] should create service with ipv4,v6 cluster ip; should function for pod-Service: http, udp',
    file: 'dual_stack.go',
    checks: 'a RequireDualStack Service has a ClusterIP and an EndpointSlice per family, and answers on both, TCP and UDP',
    namespace: 'e2e-dual-stack',
    needs: ['dualStack'],
    timeoutMs: 240_000,
    async run(cluster, ns) {
      const labels = { app: 'dual' };
      const pods = await cluster.runPods(ns, hostnamePods([['dual-1', cluster.node(0).name], ['dual-2', cluster.node(1).name]], labels));
      await cluster.lab.kubectlApply(hostnameService(ns, 'dual', labels, '  ipFamilyPolicy: RequireDualStack\n  ipFamilies: [IPv4, IPv6]\n'));
      const { spec } = await cluster.service(ns, 'dual');
      expect(spec.ipFamilies).toEqual(['IPv4', 'IPv6']);
      expect(spec.clusterIPs?.map((ip) => (ip.includes(':') ? 'IPv6' : 'IPv4'))).toEqual(['IPv4', 'IPv6']);
      await waitFor(
        'an EndpointSlice per family',
        async () => {
          const types = (
            JSON.parse(await cluster.lab.kubectl('get', 'endpointslices.discovery.k8s.io', '-n', ns, '-l', 'kubernetes.io/service-name=dual', '-o', 'json')) as {
              items: { addressType: string; endpoints?: unknown[] }[];
            }
          ).items.map((slice) => `${slice.addressType}:${slice.endpoints?.length ?? 0}`);
          if (types.sort().join(' ') === 'IPv4:2 IPv6:2') return true;
          throw new Error(`slices: ${types.join(' ')}`);
        },
        { timeoutMs: PROXY_LAG_MS, intervalMs: 500 },
      );
      const client = (await cluster.clientPod(cluster.node(0).name)).netns;
      await allOf(
        spec.clusterIPs!.flatMap((ip) =>
          (['TCP', 'UDP'] as const).map(
            (protocol) => [`${protocol} to ${hostPort(ip, 80)}`, (t: number) => cluster.waitForAnswers(client, { protocol, host: ip, port: 80 }, pods.map((pod) => pod.identity), t)] as const,
          ),
        ),
      );
      // A pod's IPv6 address is what its endpoint is in the IPv6 slice: the pods have one.
      expect(pods.every((pod) => ipv6(pod.ips) !== undefined)).toBe(true);
    },
  },
  ...(
    [
      ['service.kubernetes.io/service-proxy-name', 'foo-bar', 'should implement service.kubernetes.io/service-proxy-name'],
      ['service.kubernetes.io/headless', '', 'should implement service.kubernetes.io/headless'],
    ] as const
  ).map(
    ([label, value, e2e]): ServiceScenario => ({
      e2e,
      file: 'service.go',
      checks: `a Service labelled ${label} is left alone by the proxy, another is served; without the label it is served`,
      namespace: `e2e-${label.split('/')[1]}`,
      timeoutMs: 240_000,
      async run(cluster, ns) {
        const pods = await cluster.runPods(ns, [
          ...hostnamePods([['disabled-1', cluster.node(1).name]], { app: 'service-disabled' }, ['TCP']),
          ...hostnamePods([['toggled-1', cluster.node(1).name]], { app: 'service-toggled' }, ['TCP']),
        ]);
        const toggled = (labelled: boolean) =>
          hostnameService(ns, 'service-toggled', { app: 'service-toggled' }, '', ['TCP']).replace(
            'namespace: ',
            labelled ? `labels: { ${label}: ${JSON.stringify(value)} }, namespace: ` : 'namespace: ',
          );
        await cluster.lab.kubectlApply(
          hostnameService(ns, 'service-disabled', { app: 'service-disabled' }, '', ['TCP']).replace('namespace: ', `labels: { ${label}: ${JSON.stringify(value)} }, namespace: `),
        );
        await cluster.lab.kubectlApply(toggled(false));
        const client = (await cluster.clientPod(cluster.node(0).name)).netns;
        const disabled = (await cluster.service(ns, 'service-disabled')).spec.clusterIP;
        const toggledIp = (await cluster.service(ns, 'service-toggled')).spec.clusterIP;
        await cluster.waitForAnswers(client, { protocol: 'TCP', host: toggledIp, port: 80 }, [pods[1]!.identity]);
        await cluster.waitForNoAnswer(client, { protocol: 'TCP', host: disabled, port: 80 });
        await cluster.lab.kubectlApply(toggled(true));
        await cluster.waitForNoAnswer(client, { protocol: 'TCP', host: toggledIp, port: 80 });
        await cluster.lab.kubectlApply(toggled(false));
        await cluster.waitForAnswers(client, { protocol: 'TCP', host: toggledIp, port: 80 }, [pods[1]!.identity]);
      },
    }),
  ),
  {
    e2e: 'should provide secure master service [Conformance]',
    file: 'service.go',
    checks: 'default/kubernetes exists, has the API server as its endpoint, and a pod completes a TLS handshake with it through its ClusterIP',
    namespace: 'default',
    timeoutMs: 120_000,
    async run(cluster) {
      const { spec } = await cluster.service('default', 'kubernetes');
      expect(spec.ports[0]).toMatchObject({ name: 'https', port: 443, protocol: 'TCP' });
      const client = (await cluster.clientPod(cluster.node(0).name)).netns;
      // The API server serves TLS and says nothing first: a completed handshake is its answer.
      const outcome = await cluster.waitForOutcome(client, { protocol: 'TCP', host: spec.clusterIP, port: 443, tls: true, timeoutMs: 10_000 }, 'a TLS handshake with the API server', (o) => o.ok);
      // The certificate the embedded API server serves (kube-apiserver's CN): it, not any TLS server, answered.
      expect(outcome.reply).toMatch(/^TLS TLSv1\.[23], certificate kube-apiserver$/);
    },
  },
];
