import { ApiException, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { ipFamily } from './ip-allocator.js';
import { LabKubelet } from './kubelet.js';
import type { RunningPod } from './kubelet.js';
import { LabNode } from './lab-node.js';
import type { LabNodeUplink, PodSandbox, SkippedPort } from './lab-node.js';
import { assertRunId, newRunId, runPrefix } from './names.js';
import type { ListenPort } from './pod-agent.js';
import { nodeManifest, podManifest, readyNodeStatus } from './pod-objects.js';
import type { LabPodSpec } from './pod-objects.js';
import type { LabProtocol, PodRef, ProbeOptions, ProbeRequest, ProbeResult, ProbeSource } from './probe-types.js';
import { DEFAULT_PROBE_TIMEOUT_MS, podKey, runProbeRequests } from './probing.js';

export const DEFAULT_LAB_NODE_NAME = 'lab-node';
export const DEFAULT_LAB_POD_CIDRS: readonly string[] = ['10.244.0.0/24', 'fd00:10:244::/64'];
const defaultPodTimeoutMs = 20_000;

export interface LabOptions {
  /** The API server the lab registers its node and pods with: the embedded one (anything with a `url`) or a URL. */
  apiServer?: { url: string; kubeconfigYaml?(): string } | string;
  /** Instead of `apiServer`: how to reach any API server. */
  kubeConfig?: KubeConfig;
  /** The Node object's name; pods bound to it (`spec.nodeName`) run in the lab. Default `lab-node`. */
  nodeName?: string;
  /** At most one per family; the first is the node's primary family. Default 10.244.0.0/24 and fd00:10:244::/64. */
  podCidrs?: readonly string[];
  /** The node's InternalIPs, on the node netns's loopback; default the first host address of each pod CIDR. */
  nodeIps?: readonly string[];
  /** 1-6 lowercase letters or digits in every name the lab creates (`krt-<runId>-...`); random by default. */
  runId?: string;
  /** How long addPod() and waitForPod() wait for a pod to run. Default 20 s. */
  podTimeoutMs?: number;
  /** How long a probe waits before it counts as blocked. Default 500 ms. */
  probeTimeoutMs?: number;
  /** Plugs the node into an underlay (see startLabCluster); `nodeIps` then sit on its uplink. */
  uplink?: LabNodeUplink;
  /** Attach pods with the CNI plugins of this configuration list instead of routed veths (LabNodeOptions). */
  cniConfFile?: string;
}

/** A pod running in the lab. */
export interface LabPod {
  namespace: string;
  name: string;
  uid: string;
  netns: string;
  /** One address per pod CIDR, primary family first (as in status.podIPs). */
  ips: string[];
  ipv4?: string;
  ipv6?: string;
  /** What the pod's agent listens on, each on IPv4 and IPv6. */
  ports: ListenPort[];
  /** Declared ports the lab cannot serve (SCTP), with the reason. */
  skippedPorts: SkippedPort[];
  /** The pod agent's process id. */
  pid: number | undefined;
}

export interface Lab {
  readonly runId: string;
  /** `krt-<runId>-`: the start of every namespace, interface and process name of this lab. */
  readonly prefix: string;
  readonly nodeName: string;
  /** The node's network namespace, where the dataplane under test programs its rules (`ip netns exec`). */
  readonly nodeNetns: string;
  readonly nodeIps: readonly string[];
  readonly podCidrs: readonly string[];
  /** The client configuration the lab uses, for tests that want to talk to the same API server. */
  readonly kubeConfig: KubeConfig;
  /** Creates a Pod bound to the lab node through the API and resolves once it runs. */
  addPod(spec: LabPodSpec): Promise<LabPod>;
  /** Deletes a Pod through the API and resolves once its netns and agent are gone. */
  deletePod(ref: PodRef): Promise<void>;
  /** Waits for a pod that someone else created through the API (kubectl, a test) to run in the lab. */
  waitForPod(ref: PodRef, timeoutMs?: number): Promise<LabPod>;
  /** The running pod, or an error naming the pods that do run. */
  pod(ref: PodRef): LabPod;
  pods(): LabPod[];
  /**
   * Whether `port` on a pod or address answers from inside `from`: a TCP connect that reads the pod's answer, or a
   * UDP datagram that gets one. Throws for a protocol the lab cannot probe (SCTP), with the reason.
   */
  probe(from: ProbeSource, to: string | PodRef, port: number, protocol?: LabProtocol, options?: ProbeOptions): Promise<boolean>;
  /** Runs every probe at once, one message per source pod; results in request order, SCTP ones `skipped`. */
  probeMany(requests: readonly ProbeRequest[]): Promise<ProbeResult[]>;
  /** Stops watching and removes every namespace, veth pair and process the lab made; leaves API objects alone. */
  stop(): Promise<void>;
}

export async function startLab(options: LabOptions): Promise<Lab> {
  const kubeConfig = resolveKubeConfig(options);
  const runId = options.runId ?? newRunId();
  assertRunId(runId);
  const nodeName = options.nodeName ?? DEFAULT_LAB_NODE_NAME;
  const node = await LabNode.create({
    runId,
    nodeName,
    podCidrs: options.podCidrs ?? DEFAULT_LAB_POD_CIDRS,
    ...(options.nodeIps ? { nodeIps: options.nodeIps } : {}),
    ...(options.uplink ? { uplink: options.uplink } : {}),
    ...(options.cniConfFile !== undefined && { cniConfFile: options.cniConfFile }),
  });
  const kubelet = new LabKubelet(kubeConfig, node);
  try {
    await registerNode(kubeConfig.makeApiClient(CoreV1Api), node);
    await kubelet.start();
  } catch (error) {
    await kubelet.stop().catch(() => undefined);
    await node.destroy().catch(() => undefined);
    throw error;
  }
  return new RunningLab(kubeConfig, node, kubelet, options);
}

class RunningLab implements Lab {
  readonly prefix: string;
  private readonly core: CoreV1Api;
  private readonly knownNamespaces = new Set<string>();
  private readonly podTimeoutMs: number;
  private readonly probeTimeoutMs: number;
  private stopping: Promise<void> | undefined;

  constructor(
    readonly kubeConfig: KubeConfig,
    private readonly node: LabNode,
    private readonly kubelet: LabKubelet<PodSandbox>,
    options: LabOptions,
  ) {
    this.prefix = runPrefix(node.runId);
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.podTimeoutMs = options.podTimeoutMs ?? defaultPodTimeoutMs;
    this.probeTimeoutMs = options.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS;
  }

  get runId(): string {
    return this.node.runId;
  }

  get nodeName(): string {
    return this.node.nodeName;
  }

  get nodeNetns(): string {
    return this.node.netns;
  }

  get nodeIps(): readonly string[] {
    return this.node.nodeIps;
  }

  get podCidrs(): readonly string[] {
    return this.node.podCidrs.map((cidr) => cidr.cidr);
  }

  async addPod(spec: LabPodSpec): Promise<LabPod> {
    const namespace = spec.namespace ?? 'default';
    await this.ensureNamespace(namespace);
    const created = await this.core.createNamespacedPod({ namespace, body: podManifest(spec, this.nodeName) });
    const running = await this.kubelet.waitUntilRunning(podKey({ namespace, name: spec.name }), created.metadata?.uid, this.podTimeoutMs);
    return labPod(running);
  }

  async deletePod(ref: PodRef): Promise<void> {
    const key = podKey(ref);
    const [namespace = '', name = ''] = key.split('/');
    try {
      await this.core.deleteNamespacedPod({ name, namespace });
    } catch (error) {
      if (!(error instanceof ApiException && error.code === 404)) throw error;
    }
    await this.kubelet.waitUntilGone(key, this.podTimeoutMs);
  }

  async waitForPod(ref: PodRef, timeoutMs = this.podTimeoutMs): Promise<LabPod> {
    return labPod(await this.kubelet.waitUntilRunning(podKey(ref), undefined, timeoutMs));
  }

  pod(ref: PodRef): LabPod {
    return labPod(this.sandboxEntry(ref));
  }

  pods(): LabPod[] {
    return this.kubelet.runningPods().map(labPod);
  }

  async probe(
    from: ProbeSource,
    to: string | PodRef,
    port: number,
    protocol: LabProtocol = 'TCP',
    options: ProbeOptions = {},
  ): Promise<boolean> {
    const [result] = await this.probeMany([{ ...options, from, to, port, protocol }]);
    if (result?.skipped !== undefined) throw new Error(result.skipped);
    return result?.ok ?? false;
  }

  probeMany(requests: readonly ProbeRequest[]): Promise<ProbeResult[]> {
    return runProbeRequests(requests, (ref) => this.sandboxEntry(ref).sandbox, this.probeTimeoutMs);
  }

  stop(): Promise<void> {
    this.stopping ??= (async () => {
      const errors: unknown[] = [];
      await this.kubelet.stop().catch((error: unknown) => errors.push(error));
      await this.node.destroy().catch((error: unknown) => errors.push(error));
      if (errors.length > 0) throw new AggregateError(errors, `stopping lab ${this.prefix} failed`);
    })();
    return this.stopping;
  }

  private sandboxEntry(ref: PodRef): RunningPod<PodSandbox> {
    const key = podKey(ref);
    const running = this.kubelet.runningPod(key);
    if (!running) {
      const names = this.kubelet.runningPods().map((pod) => `${pod.sandbox.namespace}/${pod.sandbox.name}`);
      throw new Error(`pod ${key} does not run in lab node ${this.nodeName} (running: ${names.join(', ') || 'none'})`);
    }
    return running;
  }

  private async ensureNamespace(name: string): Promise<void> {
    if (this.knownNamespaces.has(name)) return;
    try {
      await this.core.createNamespace({ body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name } } });
    } catch (error) {
      if (!(error instanceof ApiException && error.code === 409)) throw error;
    }
    this.knownNamespaces.add(name);
  }
}

function labPod({ uid, sandbox }: RunningPod<PodSandbox>): LabPod {
  const ipv4 = sandbox.ips.find((ip) => ipFamily(ip) === 4);
  const ipv6 = sandbox.ips.find((ip) => ipFamily(ip) === 6);
  return {
    namespace: sandbox.namespace,
    name: sandbox.name,
    uid,
    netns: sandbox.netns,
    ips: [...sandbox.ips],
    ...(ipv4 ? { ipv4 } : {}),
    ...(ipv6 ? { ipv6 } : {}),
    ports: sandbox.ports.map((port) => ({ ...port })),
    skippedPorts: sandbox.skippedPorts.map((port) => ({ ...port })),
    pid: sandbox.agent.pid,
  };
}

function resolveKubeConfig(options: LabOptions): KubeConfig {
  if (options.kubeConfig) return options.kubeConfig;
  if (!options.apiServer) throw new Error('startLab needs an apiServer (or a kubeConfig)');
  const kubeConfig = new KubeConfig();
  if (typeof options.apiServer !== 'string' && options.apiServer.kubeconfigYaml) {
    // The embedded server's own kubeconfig: its CA and a token it accepts, when it serves HTTPS or requires one.
    kubeConfig.loadFromString(options.apiServer.kubeconfigYaml());
    return kubeConfig;
  }
  const server = typeof options.apiServer === 'string' ? options.apiServer : options.apiServer.url;
  kubeConfig.loadFromOptions({
    // client-node refuses plain http:// unless TLS verification is "skipped", although there is no TLS to verify.
    clusters: [{ name: 'lab', server, skipTLSVerify: server.startsWith('http:') }],
    users: [{ name: 'lab' }],
    contexts: [{ name: 'lab', cluster: 'lab', user: 'lab' }],
    currentContext: 'lab',
  });
  return kubeConfig;
}

/** Creates or adopts the Node object: pod CIDRs in its spec, the node's addresses and readiness in its status. */
async function registerNode(core: CoreV1Api, node: LabNode): Promise<void> {
  const podCidrs = node.podCidrs.map((cidr) => cidr.cidr);
  const manifest = nodeManifest(node.nodeName, podCidrs, node.netns);
  let registered;
  try {
    const existing = await core.readNode({ name: node.nodeName });
    existing.metadata = {
      ...existing.metadata,
      labels: { ...existing.metadata?.labels, ...manifest.metadata?.labels },
      annotations: { ...existing.metadata?.annotations, ...manifest.metadata?.annotations },
    };
    existing.spec = { ...existing.spec, ...manifest.spec };
    registered = await core.replaceNode({ name: node.nodeName, body: existing });
  } catch (error) {
    if (!(error instanceof ApiException && error.code === 404)) throw error;
    registered = await core.createNode({ body: manifest });
  }
  registered.status = { ...registered.status, ...readyNodeStatus(node.nodeName, node.nodeIps) };
  await core.replaceNodeStatus({ name: node.nodeName, body: registered });
}
