import type { NetworkPolicySpec } from './policy-spec.js';
import { startApiServer } from '../apiserver/server.js';
import type { ApiServer } from '../apiserver/server.js';
import type { KubeObject } from '../apiserver/kube-object.js';
import { startLab } from '../lab/lab.js';
import type { Lab, LabPod } from '../lab/lab.js';
import { containerPorts, NAMESPACES, namespaceLabels, POD_KEYS, POD_NAMES, podLabels, splitPodKey } from './model.js';
import type { IpFamily, PodKey } from './model.js';

const POLICY_API_VERSION = 'networking.k8s.io/v1';
const POLICY_KIND = 'NetworkPolicy';

export interface WorldOptions {
  nodeName?: string;
  /** How long a probe waits before it counts as blocked; default the lab's (500 ms). */
  probeTimeoutMs?: number;
  /** Default: the lab's, 10.244.0.0/24 and fd00:10:244::/64. */
  podCidrs?: readonly string[];
  /** The lab's run id (1-6 lowercase letters or digits) in every name it creates; random by default. */
  runId?: string;
}

/**
 * The suite's cluster: an embedded API server, one lab node and the nine pods of the model, plus what it takes to
 * put them back the way they started between cases.
 */
export class ConformanceWorld {
  private constructor(
    readonly api: ApiServer,
    readonly lab: Lab,
    readonly kubeconfig: string,
    private readonly pods: ReadonlyMap<PodKey, LabPod>,
  ) {}

  static async start(options: WorldOptions = {}): Promise<ConformanceWorld> {
    const api = await startApiServer({ port: 0 });
    let lab: Lab | undefined;
    try {
      const kubeconfig = await api.writeKubeconfig();
      lab = await startLab({
        apiServer: api,
        ...(options.nodeName === undefined ? {} : { nodeName: options.nodeName }),
        ...(options.podCidrs === undefined ? {} : { podCidrs: options.podCidrs }),
        ...(options.runId === undefined ? {} : { runId: options.runId }),
        ...(options.probeTimeoutMs === undefined ? {} : { probeTimeoutMs: options.probeTimeoutMs }),
      });
      for (const namespace of NAMESPACES) {
        api.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace, labels: namespaceLabels(namespace) } });
      }
      const started = lab;
      const pods = await Promise.all(
        NAMESPACES.flatMap((namespace) =>
          POD_NAMES.map((name) => started.addPod({ namespace, name, labels: podLabels(name), ports: containerPorts() })),
        ),
      );
      return new ConformanceWorld(api, lab, kubeconfig, new Map(pods.map((pod) => [`${pod.namespace}/${pod.name}` as PodKey, pod])));
    } catch (error) {
      await lab?.stop().catch(() => undefined);
      await api.close().catch(() => undefined);
      throw error;
    }
  }

  get nodeName(): string {
    return this.lab.nodeName;
  }

  get nodeNetns(): string {
    return this.lab.nodeNetns;
  }

  /** The pod's address of a family. */
  podIp(key: PodKey, family: IpFamily = 4): string {
    const pod = this.pods.get(key);
    const ip = family === 4 ? pod?.ipv4 : pod?.ipv6;
    if (ip === undefined) throw new Error(`pod ${key} has no IPv${family} address`);
    return ip;
  }

  /** The node's pod CIDR of a family. */
  podCidr(family: IpFamily = 4): string {
    const cidr = this.lab.podCidrs.find((candidate) => candidate.includes(':') === (family === 6));
    if (cidr === undefined) throw new Error(`the lab has no IPv${family} pod CIDR`);
    return cidr;
  }

  /** Creates the policy, or replaces the spec of the one with that name. */
  applyPolicy(namespace: string, name: string, spec: NetworkPolicySpec): void {
    this.api.upsert({ apiVersion: POLICY_API_VERSION, kind: POLICY_KIND, metadata: { namespace, name }, spec } as KubeObject);
  }

  deletePolicy(namespace: string, name: string): void {
    this.api.delete(POLICY_API_VERSION, POLICY_KIND, namespace, name);
  }

  /** Replaces every label of a pod (the API server keeps nothing of the old set). */
  setPodLabels(key: PodKey, labels: Record<string, string>): void {
    const { namespace, name } = splitPodKey(key);
    this.replaceLabels('v1', 'Pod', namespace, name, labels);
  }

  /** Replaces every label of a namespace; the API server adds `kubernetes.io/metadata.name` back. */
  setNamespaceLabels(namespace: string, labels: Record<string, string>): void {
    this.replaceLabels('v1', 'Namespace', undefined, namespace, labels);
  }

  /** Deletes every NetworkPolicy and puts every label back as it started. */
  reset(): void {
    for (const policy of this.api.list(POLICY_API_VERSION, POLICY_KIND)) {
      this.deletePolicy(policy.metadata.namespace ?? 'default', policy.metadata.name ?? '');
    }
    for (const namespace of NAMESPACES) this.setNamespaceLabels(namespace, namespaceLabels(namespace));
    for (const key of POD_KEYS) this.setPodLabels(key, podLabels(splitPodKey(key).name));
  }

  async stop(): Promise<void> {
    const errors: unknown[] = [];
    await this.lab.stop().catch((error: unknown) => errors.push(error));
    await this.api.close().catch((error: unknown) => errors.push(error));
    if (errors.length > 0) throw new AggregateError(errors, 'stopping the conformance world failed');
  }

  private replaceLabels(apiVersion: string, kind: string, namespace: string | undefined, name: string, labels: Record<string, string>): void {
    const current = this.api.get(apiVersion, kind, namespace, name);
    if (!current) throw new Error(`${kind} ${namespace ? `${namespace}/` : ''}${name} does not exist`);
    const wanted = kind === 'Namespace' ? { ...labels, 'kubernetes.io/metadata.name': name } : labels;
    if (sameLabels(current.metadata.labels ?? {}, wanted)) return;
    this.api.update({ ...current, metadata: { ...current.metadata, labels: { ...labels } } });
  }
}

function sameLabels(a: Record<string, string>, b: Record<string, string>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => a[key] === b[key]);
}
