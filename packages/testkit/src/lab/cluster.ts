import type { KubeConfig } from '@kubernetes/client-node';
import { parsePodCidr } from './ip-allocator.js';
import { startLab, type Lab } from './lab.js';
import { assertRunId, newRunId, runPrefix } from './names.js';
import { createLabUnderlay, type LabUnderlay } from './underlay.js';

export interface LabClusterNodeSpec {
  name: string;
  /** At most one per family, as `spec.podCIDRs`. */
  podCidrs: readonly string[];
  /** Attach this node's pods with the CNI plugins of this configuration list (LabNodeOptions.cniConfFile). */
  cniConfFile?: string;
}

export interface LabClusterOptions {
  /** The API server every node registers with: the embedded one (anything with a `url`) or a URL. */
  apiServer?: { url: string; kubeconfigYaml?(): string } | string;
  kubeConfig?: KubeConfig;
  /**
   * A number of nodes, named `lab-node-1` ... with pod CIDRs 10.244.<k-1>.0/24 and fd00:10:244:<k-1>::/64, or the
   * nodes themselves. Default 2.
   */
  nodes?: number | readonly LabClusterNodeSpec[];
  /** 1-6 lowercase letters or digits in every name (`krt-<runId>-...`); random by default. */
  runId?: string;
  /**
   * The underlay to plug the nodes into, when the caller made it first (to start the API server on its host
   * address); the caller removes it. Without it the cluster makes one on `underlayCidrs` and removes it on stop.
   */
  underlay?: LabUnderlay;
  /** Subnets of the underlay the cluster makes; see createLabUnderlay. */
  underlayCidrs?: readonly string[];
  podTimeoutMs?: number;
  probeTimeoutMs?: number;
}

/** Lab nodes joined by an underlay: each one a Lab (its own netns, pod CIDRs, kubelet) with addresses on the underlay. */
export interface LabCluster {
  readonly runId: string;
  readonly prefix: string;
  readonly underlay: LabUnderlay;
  /** In the order of `nodes`: the first is the one `npm start` prints first. */
  readonly nodes: readonly Lab[];
  /** The node of that name, or an error naming the ones there are. */
  node(name: string): Lab;
  /** Stops every node (its pods, its netns), then the underlay if the cluster made it. Tries everything. */
  stop(): Promise<void>;
}

export function defaultClusterNodes(count: number): LabClusterNodeSpec[] {
  if (!Number.isInteger(count) || count < 1 || count > 200) throw new Error(`a lab cluster has 1-200 nodes, not ${count}`);
  return Array.from({ length: count }, (_, index) => ({
    name: `lab-node-${index + 1}`,
    podCidrs: [`10.244.${index}.0/24`, `fd00:10:244:${index.toString(16)}::/64`].map((cidr) => parsePodCidr(cidr).cidr),
  }));
}

export async function startLabCluster(options: LabClusterOptions): Promise<LabCluster> {
  const runId = options.runId ?? newRunId();
  assertRunId(runId);
  const specs = typeof options.nodes === 'object' ? [...options.nodes] : defaultClusterNodes(options.nodes ?? 2);
  const ownUnderlay = options.underlay === undefined;
  const underlay =
    options.underlay ?? (await createLabUnderlay({ runId, ...(options.underlayCidrs && { cidrs: options.underlayCidrs }) }));
  const prefixLengths = { 4: 32, 6: 128 };
  for (const cidr of underlay.cidrs) prefixLengths[cidr.family] = cidr.prefixLength;

  const started = await Promise.allSettled(
    specs.map((spec, index) =>
      startLab({
        ...(options.apiServer !== undefined && { apiServer: options.apiServer }),
        ...(options.kubeConfig !== undefined && { kubeConfig: options.kubeConfig }),
        ...(options.podTimeoutMs !== undefined && { podTimeoutMs: options.podTimeoutMs }),
        ...(options.probeTimeoutMs !== undefined && { probeTimeoutMs: options.probeTimeoutMs }),
        runId,
        nodeName: spec.name,
        podCidrs: spec.podCidrs,
        nodeIps: underlay.nodeIps(index + 1),
        uplink: {
          netns: underlay.netns,
          bridge: underlay.bridge,
          peerName: `node${index + 1}`,
          prefixLengths,
          // The host is every node's default gateway, as a router on a node subnet; it does not forward, so pods on
          // other nodes are reached only over the routes the dataplane (BGP) installs.
          gateways: underlay.hostIps,
        },
        ...(spec.cniConfFile !== undefined && { cniConfFile: spec.cniConfFile }),
      }),
    ),
  );
  const nodes = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const stop = async () => {
    const results = await Promise.allSettled(nodes.map((node) => node.stop()));
    const errors = results.flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []));
    if (ownUnderlay) await underlay.remove().catch((error: unknown) => errors.push(error));
    if (errors.length > 0) throw new AggregateError(errors, `stopping lab cluster ${runPrefix(runId)} failed`);
  };
  const failures = started.flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []));
  if (failures.length > 0) {
    await stop().catch(() => undefined);
    throw new AggregateError(failures, `lab cluster ${runPrefix(runId)} did not start: ${failures.map(String).join('; ')}`);
  }

  let stopping: Promise<void> | undefined;
  return {
    runId,
    prefix: runPrefix(runId),
    underlay,
    nodes,
    node(name) {
      const found = nodes.find((node) => node.nodeName === name);
      if (!found) throw new Error(`lab cluster has no node ${name} (nodes: ${nodes.map((node) => node.nodeName).join(', ')})`);
      return found;
    },
    stop: () => (stopping ??= stop()),
  };
}
