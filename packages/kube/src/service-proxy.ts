import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { IpFamily } from './ip-address.js';
import type { KubeContext } from './kube-context.js';
import { cidrOption, strictServiceAddressOptionFields } from './service-addresses.js';

/** kube-router's Service annotations, read by both service proxies (each refuses those it cannot honour). */
export const SERVICE_ANNOTATIONS = {
  scheduler: 'kube-router.io/service.scheduler',
  schedulerFlags: 'kube-router.io/service.schedflags',
  local: 'kube-router.io/service.local',
  skipLoadBalancerIps: 'kube-router.io/service.skiplbips',
  hairpin: 'kube-router.io/service.hairpin',
  hairpinExternalIps: 'kube-router.io/service.hairpin.externalips',
  dsr: 'kube-router.io/service.dsr',
} as const;

/** Services labelled with another proxy's name are that proxy's (`--service-proxy-name`). */
export const SERVICE_PROXY_NAME_LABEL = 'service.kubernetes.io/service-proxy-name';
export const HEADLESS_LABEL = 'service.kubernetes.io/headless';

/** Why kube-router's proxy leaves a Service alone, or undefined when it programs it (as kube-proxy skips them). */
export function serviceSkipReason(svc: V1Service, serviceProxyName: string): string | undefined {
  const labels = svc.metadata?.labels ?? {};
  if (svc.spec?.type === 'ExternalName') return 'ExternalName';
  const clusterIp = svc.spec?.clusterIP;
  if (clusterIp === 'None') return 'headless';
  if (!clusterIp) return 'no ClusterIP';
  if (HEADLESS_LABEL in labels) return `labelled ${HEADLESS_LABEL}`;
  const proxyName = labels[SERVICE_PROXY_NAME_LABEL];
  if (proxyName !== undefined && proxyName !== serviceProxyName) return `${SERVICE_PROXY_NAME_LABEL}=${proxyName}`;
  return undefined;
}

/** What a service proxy reads of the cluster: its Services, their EndpointSlices and its Node. */
export interface ServiceProxySources {
  services(): readonly V1Service[];
  slicesFor(namespace: string, name: string): readonly V1EndpointSlice[];
  node(): V1Node | undefined;
  hasSynced(): boolean;
  onChange(handler: () => void): () => void;
  /** Records a Warning event on a Service. */
  warnService(namespace: string, name: string, reason: string, message: string): void;
}

/** The agent's shared informers as a service proxy's sources. */
export function serviceProxySources(kube: KubeContext, nodeName: string, logger: Logger): ServiceProxySources {
  const services = kube.informers.services();
  const slices = kube.informers.endpointSlices();
  const nodes = kube.informers.nodes();
  return {
    services: () => services.list(),
    slicesFor: (namespace, name) => slices.listForService(namespace, name),
    node: () => nodes.get(nodeName),
    hasSynced: () => services.hasSynced() && slices.hasSynced() && nodes.hasSynced(),
    onChange(handler) {
      const removers = (['services', 'endpointslices', 'nodes'] as const).map((resource) => kube.informers.onChange(resource, handler));
      return () => removers.forEach((remove) => remove());
    },
    warnService(namespace, name, reason, message) {
      const service = services.get(namespace, name);
      const involved = service ? { ...service, apiVersion: 'v1', kind: 'Service' } : { apiVersion: 'v1', kind: 'Service', namespace, name };
      kube.events.warning(involved, reason, message).catch((error: unknown) => {
        logger.warn({ err: error, service: `${namespace}/${name}`, reason }, 'could not record event');
      });
    },
  };
}

/**
 * The options both service proxies have, with the same names and meanings, so that the agent maps the same
 * kube-router flags onto either; each proxy's schema spreads them and adds its own.
 */
export const serviceProxyOptionFields = {
  /** --enable-ipv4 / --enable-ipv6: which families of Service addresses are programmed. */
  enableIpv4: z.boolean().default(true),
  enableIpv6: z.boolean().default(false),
  /** --ipvs-sync-period: the periodic full sync, which reads the kernel back and repairs drift. */
  syncPeriodMs: z.number().int().positive().default(300_000),
  minSyncIntervalMs: z.number().int().nonnegative().optional(),
  syncTimeoutMs: z.number().int().nonnegative().optional(),
  /** Runs every command inside this network namespace (tests, the lab). */
  netns: z.string().min(1).optional(),
  /** Deadline of each kernel command. */
  commandTimeoutMs: z.number().int().positive().default(60_000),
  /** --nodeport-bindon-all-ip: NodePorts on every local address instead of the Node's InternalIP/ExternalIP. */
  nodePortBindOnAllIp: z.boolean().default(false),
  /** --masquerade-all: SNAT all Service traffic, not only what comes from outside the pod CIDRs. */
  masqueradeAll: z.boolean().default(false),
  /** Traffic from these is not masqueraded (unless masqueradeAll); empty: the Node's pod CIDRs (nodePodCidrs). */
  podCidrs: z.array(cidrOption).default([]),
  /**
   * --strict-external-ip-validation and its ranges: only the externalIPs and LoadBalancer IPs they allow are
   * programmed; each refused address is a Warning on its Service.
   */
  ...strictServiceAddressOptionFields,
  /** --service-proxy-name: Services labelled service.kubernetes.io/service-proxy-name with another value are skipped. */
  serviceProxyName: z.string().default('kube-router'),
  /** healthCheckNodePort servers listen on this address (kube-router: every address). */
  healthCheckBindAddress: z.string().default('0.0.0.0'),
};

/** The families --enable-ipv4 and --enable-ipv6 turn on, IPv4 first. */
export function enabledFamilies(options: { readonly enableIpv4: boolean; readonly enableIpv6: boolean }): IpFamily[] {
  return [...(options.enableIpv4 ? (['ipv4'] as const) : []), ...(options.enableIpv6 ? (['ipv6'] as const) : [])];
}

/**
 * Per Service, what a proxy last computed from it, with the slices and the node context it was computed from. Keyed by
 * the informer's object: an update is a new object, so an entry is reused only while nothing it was made of changed.
 */
export type ServiceOutcomeCache<T> = WeakMap<V1Service, { readonly contextKey: string; readonly slices: readonly V1EndpointSlice[]; readonly outcome: T }>;

/**
 * What `compute` made of this Service last time, when the Service, its slices (the same objects, in the same order)
 * and `contextKey` (what else the outcome depends on: options, the node) are unchanged; otherwise computes and keeps
 * it. So a proxy's event sync costs what its change costs, not what the cluster holds. Without a cache, computes.
 */
export function cachedServiceOutcome<T>(
  cache: ServiceOutcomeCache<T> | undefined,
  svc: V1Service,
  slices: readonly V1EndpointSlice[],
  contextKey: string,
  compute: (slices: readonly V1EndpointSlice[]) => T,
): T {
  const cached = cache?.get(svc);
  if (cached && cached.contextKey === contextKey && cached.slices.length === slices.length && cached.slices.every((slice, index) => slice === slices[index])) {
    return cached.outcome;
  }
  const outcome = compute(slices);
  cache?.set(svc, { contextKey, slices, outcome });
  return outcome;
}
