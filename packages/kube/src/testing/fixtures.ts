import type { KubeConfig } from '@kubernetes/client-node';
import { startApiServer } from '@kube-router/testkit';
import type { ApiServer, ApiServerOptions, KubeObject } from '@kube-router/testkit';
import { loadKubeConfig } from '../config.js';

export interface TestCluster {
  server: ApiServer;
  kubeConfig: KubeConfig;
  close(): Promise<void>;
}

/** The embedded API server and a client configuration for it, loaded the way the agent loads --kubeconfig. */
export async function startTestCluster(options: ApiServerOptions = {}): Promise<TestCluster> {
  const server = await startApiServer({ port: 0, ...options });
  const kubeConfig = loadKubeConfig({ kubeconfig: await server.writeKubeconfig(), env: {} });
  return { server, kubeConfig, close: () => server.close() };
}

/** testkit's log capture, beside the fixtures that the tests import. */
export { captureLogs } from '@kube-router/testkit';
export type { CapturedLogs } from '@kube-router/testkit';

export function pod(name: string, options: { namespace?: string; nodeName?: string; labels?: Record<string, string> } = {}) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: options.namespace ?? 'default', ...(options.labels && { labels: options.labels }) },
    spec: { ...(options.nodeName && { nodeName: options.nodeName }), containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.10' }] },
  };
}

/** The repository's one waiter (`@kube-router/testkit`), here beside the fixtures that the tests import. */
export { waitFor } from '@kube-router/testkit';

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function uniqueSuffix(): string {
  return Math.random().toString(36).slice(2, 8);
}

/** A copy of a stored object with other labels, to update it with. */
export function withLabels(object: KubeObject, labels: Record<string, string>): KubeObject {
  const copy = structuredClone(object);
  copy.metadata.labels = labels;
  return copy;
}

export interface StoredLeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

/** The spec of a Lease as the API server stores it. */
export function leaseSpec(server: ApiServer, namespace: string, name: string): StoredLeaseSpec | undefined {
  return server.get('coordination.k8s.io/v1', 'Lease', namespace, name)?.spec as StoredLeaseSpec | undefined;
}
