import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { KubeContext } from './kube-context.js';

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
