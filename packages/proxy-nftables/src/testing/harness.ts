import { ServiceRegistry } from '@kube-router/controller';
import type { PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { createKubeContext, KubeServices, loadKubeConfig } from '@kube-router/kube';
import type { KubeContext } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import type { CommandRunner } from '@kube-router/netfilter';
import { captureLogs, startApiServer } from '@kube-router/testkit';
import type { ApiServer, KubeObjectInput, LogLine } from '@kube-router/testkit';
import type { ProxyNftablesController } from '../controller.js';
import type { ProxyNftablesOptions } from '../options.js';
import { createProxyNftablesPlugin } from '../plugin.js';

export const NODE_NAME = 'tpn-node';

export interface ProxyHarness {
  readonly server: ApiServer;
  readonly kube: KubeContext;
  readonly controller: ProxyNftablesController;
  readonly metrics: AgentMetrics;
  readonly logs: LogLine[];
  close(): Promise<void>;
}

/** The plugin created as the agent creates it, against the embedded API server, programming the kernel through `runner`. */
export async function startProxy(runner: CommandRunner, options: ProxyNftablesOptions, seed: readonly KubeObjectInput[] = [], existing?: ApiServer): Promise<ProxyHarness> {
  const server = existing ?? (await startApiServer({ port: 0 }));
  for (const object of seed) server.create(object);
  const kubeconfig = await server.writeKubeconfig();
  const { logger, lines: logs } = captureLogs((process.env.TPN_LOG as 'debug' | 'info' | undefined) ?? 'warn', { echo: process.env.TPN_LOG !== undefined });
  const metrics = new AgentMetrics({ collectDefaultMetrics: false });
  const health = new HealthRegistry({ defaultGraceMs: 60_000 });
  const kube = createKubeContext({ kubeConfig: loadKubeConfig({ kubeconfig, env: {} }), nodeName: NODE_NAME, logger, metrics });
  const services = new ServiceRegistry();
  services.provide(KubeServices, kube);
  const ctx: PluginContext = { nodeName: NODE_NAME, logger, metrics, health, services };
  const plugin = createProxyNftablesPlugin({ runner });
  const controller = (await plugin.create(ctx, plugin.options.parse(options))) as ProxyNftablesController;
  await controller.start({ requestSync: () => undefined, signal: new AbortController().signal });
  await kube.informers.start({ cacheSyncTimeoutMs: 10_000 });
  return {
    server,
    kube,
    controller,
    metrics,
    logs,
    /** Stops the controller and informers; the API server too unless it was given. */
    async close() {
      await controller.stop();
      await kube.informers.stop();
      if (!existing) await server.close();
    },
  };
}

export interface ServiceInput {
  readonly name: string;
  /** One per family, IPv4 first. */
  readonly clusterIPs: readonly string[];
  readonly type?: 'ClusterIP' | 'NodePort' | 'LoadBalancer';
  readonly ports?: readonly { name: string; port: number; targetPort: number; protocol?: 'TCP' | 'UDP'; nodePort?: number }[];
  readonly annotations?: Record<string, string>;
  readonly sessionAffinitySeconds?: number;
  readonly externalTrafficPolicy?: 'Cluster' | 'Local';
  readonly internalTrafficPolicy?: 'Cluster' | 'Local';
  readonly healthCheckNodePort?: number;
  readonly externalIPs?: readonly string[];
  readonly loadBalancerSourceRanges?: readonly string[];
}

export function serviceObject(input: ServiceInput): KubeObjectInput {
  const families = input.clusterIPs.map((ip) => (ip.includes(':') ? 'IPv6' : 'IPv4'));
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: input.name, namespace: 'default', ...(input.annotations && { annotations: input.annotations }) },
    spec: {
      type: input.type ?? 'ClusterIP',
      clusterIP: input.clusterIPs[0],
      clusterIPs: [...input.clusterIPs],
      ipFamilies: families,
      ipFamilyPolicy: families.length > 1 ? 'RequireDualStack' : 'SingleStack',
      ports: (input.ports ?? [{ name: 'http', port: 80, targetPort: 8080 }]).map((port) => ({ protocol: 'TCP', ...port })),
      ...(input.sessionAffinitySeconds && { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: input.sessionAffinitySeconds } } }),
      ...(input.externalTrafficPolicy && { externalTrafficPolicy: input.externalTrafficPolicy }),
      ...(input.internalTrafficPolicy && { internalTrafficPolicy: input.internalTrafficPolicy }),
      ...(input.healthCheckNodePort && { healthCheckNodePort: input.healthCheckNodePort }),
      ...(input.externalIPs && { externalIPs: [...input.externalIPs] }),
      ...(input.loadBalancerSourceRanges && { loadBalancerSourceRanges: [...input.loadBalancerSourceRanges] }),
    },
  };
}

export interface EndpointInput {
  readonly ip: string;
  readonly node?: string;
  readonly ready?: boolean;
  readonly serving?: boolean;
  readonly terminating?: boolean;
}

/** One EndpointSlice of a Service for one family (the name carries it, as kube-controller-manager makes one per family). */
export function sliceObject(service: string, family: 'IPv4' | 'IPv6', endpoints: readonly EndpointInput[], ports: readonly { name: string; port: number; protocol?: 'TCP' | 'UDP' }[] = [{ name: 'http', port: 8080 }]): KubeObjectInput {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `${service}-${family.toLowerCase()}`, namespace: 'default', labels: { 'kubernetes.io/service-name': service } },
    addressType: family,
    ports: ports.map((port) => ({ protocol: 'TCP', ...port })),
    endpoints: endpoints.map((endpoint) => ({
      addresses: [endpoint.ip],
      conditions: {
        ready: endpoint.ready ?? true,
        ...(endpoint.serving !== undefined && { serving: endpoint.serving }),
        ...(endpoint.terminating !== undefined && { terminating: endpoint.terminating }),
      },
      nodeName: endpoint.node ?? NODE_NAME,
    })),
  };
}
