export {
  loadKubeConfig,
  resolveIdentity,
  resolveNamespace,
  resolveNodeName,
  SERVICE_ACCOUNT_DIR,
} from './config.js';
export type { KubeConfigOptions, NodeNameOptions } from './config.js';

export {
  CacheSyncTimeoutError,
  DEFAULT_CACHE_SYNC_TIMEOUT_MS,
  InformerFactory,
  informerKey,
  UNREADABLE_OBJECT_EVENT_REASON,
} from './informer-factory.js';
export type { InformerFactoryOptions, StartOptions } from './informer-factory.js';
export type { SkipReason } from './object-reader.js';
export type { InformerScope, InformerStatus } from './shared-informer.js';
export type { ChangeTracker, InformerChanges } from './informer-changes.js';
export { SERVICE_NAME_LABEL } from './listers.js';
export type {
  ClusterLister,
  EndpointSliceLister,
  Lister,
  ListerTypes,
  NamespacedLister,
  PodLister,
} from './listers.js';
export { RESOURCE_NAMES } from './resources.js';
export type { ResourceName, ResourceTypes } from './resources.js';
export { Backoff } from './backoff.js';
export type { BackoffOptions } from './backoff.js';

export {
  DEFAULT_LEASE_DURATION_MS,
  DEFAULT_RENEW_DEADLINE_MS,
  DEFAULT_RETRY_PERIOD_MS,
  LeaderElector,
} from './leader-elector.js';
export type { LeaderElectorOptions, StopOptions } from './leader-elector.js';
export { LeaseConflictError } from './lease-lock.js';

export { EVENT_SOURCE_COMPONENT, EventRecorder } from './event-recorder.js';
export type { EventRecorderOptions, EventType, InvolvedObject } from './event-recorder.js';

export { createKubeContext, KubeServices } from './kube-context.js';
export type { KubeContext, KubeContextOptions, LeaderElectionRequest } from './kube-context.js';

export { describeKubeError, statusCodeOf } from './api-errors.js';
export { callApi, KubeRequestTimeoutError } from './request-options.js';
export { ListError, listPage } from './http-list.js';
export type { RawListPage } from './http-list.js';
export { nodePodCidrs, POD_CIDR_ANNOTATION, POD_CIDRS_ANNOTATION } from './node-pod-cidrs.js';
export type { NodePodCidrSource } from './node-pod-cidrs.js';
export { cidrOption, serviceAddressValidator, strictServiceAddressOptionFields, strictServiceAddressRanges } from './service-addresses.js';
export { inCidrs, parseCidrs } from './cidrs.js';
export { isIp, parseCidr, parseIp } from './ip-address.js';
export type { IpCidr, IpFamily, ParsedIp } from './ip-address.js';
export type { ParsedCidr } from './cidrs.js';
export type { ServiceAddressRanges, ValidatedAddressKind } from './service-addresses.js';
export { categorizeEndpoints, servicePortEndpoints, usesClusterEndpoints, usesLocalEndpoints } from './service-endpoints.js';
export { HealthCheckServers } from './service-health-checks.js';
export {
  enabledFamilies,
  HEADLESS_LABEL,
  SERVICE_ANNOTATIONS,
  SERVICE_PROXY_NAME_LABEL,
  serviceProxyOptionFields,
  serviceProxySources,
  serviceSkipReason,
  cachedServiceOutcome,
} from './service-proxy.js';
export type { ServiceOutcomeCache, ServiceProxySources } from './service-proxy.js';
export type { HealthCheckPort } from './service-health-checks.js';
export type {
  EndpointCategories,
  EndpointNode,
  EndpointPolicy,
  EndpointSliceProblem,
  ServiceEndpoint,
  ServicePortEndpoints,
  ServicePortRef,
  TopologyMode,
} from './service-endpoints.js';
