import type { V1EndpointSlice, V1Node, V1Service, V1ServicePort } from '@kubernetes/client-node';
import { canonicalIpvsAddress, ipvsAddressFamily, ipvsServiceId } from '@kube-router/netfilter';
import type { IpFamily, IpvsDestination, IpvsProtocol, IpvsService } from '@kube-router/netfilter';
import { serviceAddressValidator } from '@kube-router/kube';
import type { ServiceAddressRanges, ValidatedAddressKind } from '@kube-router/kube';
import ipaddr from 'ipaddr.js';
import { ANNOTATIONS, HEADLESS_LABEL, SERVICE_PROXY_NAME_LABEL } from './names.js';

/** Where a virtual service's address comes from; NodePorts sit on node addresses, the others on kube-dummy-if. */
export type VirtualServerKind = 'cluster-ip' | 'node-port' | 'external-ip' | 'load-balancer';

export interface DesiredVirtualServer {
  readonly id: string;
  /** `namespace/name` of the Service. */
  readonly owner: string;
  readonly portName: string;
  readonly kind: VirtualServerKind;
  readonly service: IpvsService;
  readonly destinations: readonly IpvsDestination[];
  /** externalTrafficPolicy Local on an external address: the client's address is kept (no masquerade). */
  readonly preserveClientAddress: boolean;
  /** A pod reaching itself through this address is SNATed to it (--hairpin-mode, kube-router.io/service.hairpin). */
  readonly hairpin: boolean;
}

export interface HealthCheckPort {
  readonly owner: string;
  readonly port: number;
  readonly localEndpoints: number;
}

export interface ServiceProblem {
  readonly owner: string;
  readonly reason: string;
  readonly message: string;
}

export interface ProxyModel {
  readonly virtualServers: ReadonlyMap<string, DesiredVirtualServer>;
  /** Addresses that go on kube-dummy-if (cluster, external and load-balancer IPs), by family. */
  readonly vips: Readonly<Record<IpFamily, ReadonlySet<string>>>;
  readonly healthChecks: readonly HealthCheckPort[];
  readonly problems: readonly ServiceProblem[];
  /**
   * External and LoadBalancer IPs that strict validation kept out: a Warning each, as kube-router logs them, but no
   * failure of the sync (the Service is as its owner wrote it, and its other addresses are programmed).
   */
  readonly refused: readonly ServiceProblem[];
  /** Services programmed (not skipped), for metrics and logs. */
  readonly services: number;
}

export interface ModelInputs {
  readonly services: readonly V1Service[];
  readonly slicesFor: (namespace: string, name: string) => readonly V1EndpointSlice[];
  readonly node: V1Node | undefined;
  readonly nodeName: string;
  /** The node's local addresses (for --nodeport-bindon-all-ip), from the kernel. */
  readonly localAddresses: readonly string[];
}

export interface ModelOptions {
  readonly families: readonly IpFamily[];
  readonly nodePortBindOnAllIp: boolean;
  readonly serviceProxyName: string;
  /** --hairpin-mode: hairpin for every Service, not only the annotated ones. */
  readonly hairpinMode?: boolean;
  /** --strict-external-ip-validation with its ranges; undefined programs every externalIP and LoadBalancer IP. */
  readonly validation?: ServiceAddressRanges;
}

/** Schedulers kube-router names; any other lower-case name is passed to the kernel, which may refuse it. */
const SCHEDULER_NAME = /^[a-z]{1,15}$/;
const DEFAULT_AFFINITY_SECONDS = 10_800;
const PROTOCOLS: Record<string, IpvsProtocol> = { TCP: 'tcp', UDP: 'udp', SCTP: 'sctp' };

/**
 * Computes the IPVS state this node should have from Services, EndpointSlices and its Node: pure, so that every rule
 * of kube-router's service proxy is unit-tested without a kernel. A Service with bad input becomes a problem (a
 * Warning event) and is left out; it never stops the others.
 */
export function buildProxyModel(inputs: ModelInputs, options: ModelOptions): ProxyModel {
  const virtualServers = new Map<string, DesiredVirtualServer>();
  const vips: Record<IpFamily, Set<string>> = { ipv4: new Set(), ipv6: new Set() };
  const healthChecks: HealthCheckPort[] = [];
  const problems: ServiceProblem[] = [];
  const refused: ServiceProblem[] = [];
  const refusal = options.validation && serviceAddressValidator(options.validation);
  const families = new Set(options.families);
  const nodeAddresses = nodePortAddresses(inputs, options).filter((address) => families.has(ipvsAddressFamily(address)));
  let services = 0;

  for (const svc of inputs.services) {
    const namespace = svc.metadata?.namespace ?? 'default';
    const name = svc.metadata?.name ?? '';
    const owner = `${namespace}/${name}`;
    if (skipReason(svc, options.serviceProxyName) !== undefined) continue;
    let scheduling: Scheduling;
    try {
      scheduling = schedulingOf(svc);
    } catch (error) {
      problems.push({ owner, reason: 'InvalidServiceAnnotation', message: (error as Error).message });
      continue;
    }
    services++;
    const annotations = svc.metadata?.annotations ?? {};
    const externalLocal = svc.spec?.externalTrafficPolicy === 'Local' || annotations[ANNOTATIONS.local] === 'true';
    const internalLocal = svc.spec?.internalTrafficPolicy === 'Local';
    const hairpin = options.hairpinMode === true || ANNOTATIONS.hairpin in annotations;
    const hairpinExternal = hairpin && ANNOTATIONS.hairpinExternalIps in annotations;
    const slices = inputs.slicesFor(namespace, name);
    const clusterIps = (svc.spec?.clusterIPs?.length ? svc.spec.clusterIPs : [svc.spec?.clusterIP ?? '']).filter(isIp);
    // Only addresses of the node's families: an IPv6 LoadBalancer IP on an IPv4-only node is not refused, just unused.
    const validated = (kind: ValidatedAddressKind, addresses: readonly string[]) =>
      addresses.filter((address) => {
        if (!families.has(ipvsAddressFamily(canonicalIpvsAddress(address)))) return false;
        const why = refusal?.(kind, address);
        if (why) refused.push({ owner, reason: 'InvalidServiceAddress', message: `${kind} ${address} is not programmed: ${why}` });
        return why === undefined;
      });
    // An address that is not one is a problem of this Service (a Warning, a failed sync); its other addresses stand.
    const addresses = (kind: ValidatedAddressKind, candidates: readonly string[]) =>
      candidates.filter((address) => {
        if (isIp(address)) return true;
        problems.push({ owner, reason: 'InvalidServiceAddress', message: `${kind} ${JSON.stringify(address)} is not an IP address` });
        return false;
      });
    const externalIps = validated('externalip', addresses('externalip', svc.spec?.externalIPs ?? []));
    const lbIps = validated(
      'loadbalancerip',
      annotations[ANNOTATIONS.skipLoadBalancerIps] === 'true' || ANNOTATIONS.skipLoadBalancerIps in annotations
        ? []
        : addresses(
            'loadbalancerip',
            (svc.status?.loadBalancer?.ingress ?? []).filter((ingress) => ingress.ip && ingress.ipMode !== 'Proxy').map((ingress) => ingress.ip as string),
          ),
    );
    let localEndpointsForHealth = 0;

    for (const port of svc.spec?.ports ?? []) {
      const protocol = PROTOCOLS[port.protocol ?? 'TCP'];
      if (!protocol) {
        problems.push({ owner, reason: 'UnsupportedProtocol', message: `port ${port.name ?? port.port}: protocol ${port.protocol} is not supported by IPVS` });
        continue;
      }
      const endpoints = endpointsFor(slices, port, inputs.nodeName);
      localEndpointsForHealth = Math.max(localEndpointsForHealth, endpoints.filter((endpoint) => endpoint.local).length);
      const add = (kind: VirtualServerKind, address: string, servicePort: number, local: boolean) => {
        const canonical = canonicalIpvsAddress(address);
        const family = ipvsAddressFamily(canonical);
        if (!families.has(family)) return;
        const key = { protocol, address: canonical, port: servicePort };
        const id = ipvsServiceId(key);
        if (virtualServers.has(id)) {
          const other = virtualServers.get(id) as DesiredVirtualServer;
          if (other.owner !== owner) {
            problems.push({ owner, reason: 'DuplicateServiceAddress', message: `${id} is also claimed by Service ${other.owner}; it stays with ${other.owner}` });
          }
          return;
        }
        const destinations = endpoints
          .filter((endpoint) => ipvsAddressFamily(endpoint.address) === family && (!local || endpoint.local))
          .map((endpoint): IpvsDestination => ({ address: endpoint.address, port: endpoint.port, forwarding: 'masquerade', weight: 1 }));
        virtualServers.set(id, {
          id,
          owner,
          portName: port.name ?? '',
          kind,
          service: { ...key, ...scheduling },
          destinations: uniqueDestinations(destinations),
          preserveClientAddress: local && kind !== 'cluster-ip',
          hairpin: kind === 'cluster-ip' ? hairpin : kind !== 'node-port' && hairpinExternal,
        });
        if (kind !== 'node-port') vips[family].add(canonical);
      };
      for (const ip of clusterIps) add('cluster-ip', ip, port.port, internalLocal);
      for (const ip of externalIps) add('external-ip', ip, port.port, externalLocal);
      for (const ip of lbIps) add('load-balancer', ip, port.port, externalLocal);
      if (port.nodePort && (svc.spec?.type === 'NodePort' || svc.spec?.type === 'LoadBalancer')) {
        for (const address of nodeAddresses) add('node-port', address, port.nodePort, externalLocal);
      }
    }
    if (svc.spec?.healthCheckNodePort && svc.spec.type === 'LoadBalancer' && externalLocal) {
      healthChecks.push({ owner, port: svc.spec.healthCheckNodePort, localEndpoints: localEndpointsForHealth });
    }
  }
  return { virtualServers, vips, healthChecks, problems, refused, services };
}

/** Why kube-router's proxy leaves a Service alone, or undefined when it programs it. */
export function skipReason(svc: V1Service, serviceProxyName: string): string | undefined {
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

interface Scheduling {
  scheduler: string;
  flags: string[];
  persistentSeconds?: number;
}

/** The flag names ipvsadm prints for kube-router's `flag-1,flag-2,flag-3` (IP_VS_SVC_F_SCHED1..3). */
const NUMBERED_FLAGS: Record<string, readonly string[]> = {
  sh: ['sh-fallback', 'sh-port'],
  mh: ['mh-fallback', 'mh-port'],
};

function schedulingOf(svc: V1Service): Scheduling {
  const annotations = svc.metadata?.annotations ?? {};
  const scheduler = (annotations[ANNOTATIONS.scheduler] ?? 'rr').trim();
  if (!SCHEDULER_NAME.test(scheduler)) {
    throw new Error(`${ANNOTATIONS.scheduler}: ${JSON.stringify(scheduler)} is not an IPVS scheduler name (rr, lc, dh, sh, mh, ...)`);
  }
  const flags: string[] = [];
  const flagText = annotations[ANNOTATIONS.schedulerFlags];
  if (flagText !== undefined && (scheduler === 'sh' || scheduler === 'mh')) {
    const named = NUMBERED_FLAGS[scheduler] as readonly string[];
    for (const raw of flagText.split(',').map((flag) => flag.trim()).filter(Boolean)) {
      const numbered = /^flag-([12])$/.exec(raw);
      const flag = numbered ? (named[Number(numbered[1]) - 1] as string) : raw;
      if (!named.includes(flag)) {
        throw new Error(`${ANNOTATIONS.schedulerFlags}: ${JSON.stringify(raw)} is not a flag of ${scheduler} (${named.join(', ')}, flag-1, flag-2)`);
      }
      if (!flags.includes(flag)) flags.push(flag);
    }
  }
  const affinity = svc.spec?.sessionAffinity === 'ClientIP';
  return {
    scheduler,
    flags: flags.sort(),
    ...(affinity && { persistentSeconds: svc.spec?.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? DEFAULT_AFFINITY_SECONDS }),
  };
}

interface Endpoint {
  address: string;
  port: number;
  local: boolean;
}

/** Ready endpoints of the slices' port that matches the Service port by name (and protocol). */
function endpointsFor(slices: readonly V1EndpointSlice[], port: V1ServicePort, nodeName: string): Endpoint[] {
  const out: Endpoint[] = [];
  for (const slice of slices) {
    if (slice.addressType === 'FQDN') continue;
    const slicePort = (slice.ports ?? []).find((p) => (p.name ?? '') === (port.name ?? '') && (p.protocol ?? 'TCP') === (port.protocol ?? 'TCP'));
    if (slicePort?.port === undefined || slicePort.port === null) continue;
    for (const endpoint of slice.endpoints ?? []) {
      if (endpoint.conditions?.ready === false) continue;
      for (const address of endpoint.addresses ?? []) {
        if (!isIp(address)) continue;
        out.push({ address: canonicalIpvsAddress(address), port: slicePort.port, local: endpoint.nodeName === nodeName });
      }
    }
  }
  return out;
}

function uniqueDestinations(destinations: IpvsDestination[]): IpvsDestination[] {
  const seen = new Map<string, IpvsDestination>();
  for (const destination of destinations) seen.set(`${destination.address}:${destination.port}`, destination);
  return [...seen.values()];
}

function nodePortAddresses(inputs: ModelInputs, options: ModelOptions): string[] {
  if (options.nodePortBindOnAllIp) return [...new Set(inputs.localAddresses.map(canonicalIpvsAddress))];
  const addresses = (inputs.node?.status?.addresses ?? [])
    .filter((address) => address.type === 'InternalIP' || address.type === 'ExternalIP')
    .map((address) => address.address)
    .filter(isIp)
    .map(canonicalIpvsAddress);
  return [...new Set(addresses)];
}

function isIp(text: string | undefined): text is string {
  return text !== undefined && text !== '' && ipaddr.isValid(text);
}

