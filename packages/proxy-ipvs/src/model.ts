import type { V1EndpointSlice, V1Node, V1Service, V1ServicePort } from '@kubernetes/client-node';
import { ipvsAddressFamily, ipvsServiceId } from '@kube-router/netfilter';
import type { IpFamily, IpvsDestination, IpvsProtocol, IpvsService } from '@kube-router/netfilter';
import { cachedServiceOutcome, categorizeEndpoints, parseCidr, parseIp, serviceAddressValidator, servicePortEndpoints, serviceSkipReason } from '@kube-router/kube';
import type { EndpointCategories, EndpointPolicy, HealthCheckPort, ParsedIp, ServiceAddressRanges, ServiceEndpoint, ServiceOutcomeCache, ValidatedAddressKind } from '@kube-router/kube';
import { ANNOTATIONS } from './names.js';

/** Where a virtual service's address comes from; NodePorts sit on node addresses, the others on kube-dummy-if. */
export type VirtualServerKind = 'cluster-ip' | 'node-port' | 'external-ip' | 'load-balancer';

/**
 * What a virtual service without real servers does with a new connection, as kube-proxy does: `reject` when its
 * Service port has no usable endpoint anywhere (the client learns at once), `drop` when endpoints exist but none on
 * this node and the traffic policy is Local (a load balancer's health check steers clients elsewhere).
 */
export type NoEndpointsVerdict = 'reject' | 'drop';

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
  /** Set when `destinations` is empty: what the firewall does with new connections to it. */
  readonly noEndpoints?: NoEndpointsVerdict;
  /**
   * A LoadBalancer IP's `loadBalancerSourceRanges` of its family, as networks (`10.0.0.0/8`): only clients in them
   * reach it. Absent when the Service names none, or names a /0 of the family (every client).
   */
  readonly sourceRanges?: readonly string[];
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
  /** What is wrong with the Node's own addresses (not a Service's problem, but still a failed sync). */
  readonly nodeProblems: readonly string[];
  /** Services programmed (not skipped), for metrics and logs. */
  readonly services: number;
  /**
   * This node's ready endpoints of hairpin Services (`--hairpin-mode` or `kube-router.io/service.hairpin`), by
   * address, with the Services (`namespace/name`) they serve: their pods' bridge ports need hairpin_mode.
   */
  readonly hairpinEndpoints: ReadonlyMap<string, readonly string[]>;
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
// A Map, not an object: a protocol spelled `toString` or `__proto__` must not find a prototype member.
const PROTOCOLS: ReadonlyMap<string, IpvsProtocol> = new Map([
  ['TCP', 'tcp'],
  ['UDP', 'udp'],
  ['SCTP', 'sctp'],
]);
const PORT_RANGE = '1-65535';
const ZONE_LABEL = 'topology.kubernetes.io/zone';

/**
 * A port the kernel tools take. The API server refuses others, but a port that slips through (0, 70000) would make
 * ipset and iptables-restore refuse the whole family's batch, every Service's entries with it.
 */
function isPort(value: number | undefined): value is number {
  return value !== undefined && Number.isInteger(value) && value >= 1 && value <= 65_535;
}

/**
 * Computes the IPVS state this node should have from Services, EndpointSlices and its Node: pure, so that every rule
 * of kube-router's service proxy is unit-tested without a kernel. A Service with bad input becomes a problem (a
 * Warning event) and is left out; it never stops the others. With a cache, a Service (the informer's same object)
 * whose slices and node context are unchanged is not computed again: an event sync costs what its change costs, not
 * what the cluster holds (10,000 Services x 10 endpoints took seconds to compute).
 */
export function buildProxyModel(inputs: ModelInputs, options: ModelOptions, cache?: ProxyModelCache): ProxyModel {
  const virtualServers = new Map<string, DesiredVirtualServer>();
  const vips: Record<IpFamily, Set<string>> = { ipv4: new Set(), ipv6: new Set() };
  const healthChecks: HealthCheckPort[] = [];
  const problems: ServiceProblem[] = [];
  const refused: ServiceProblem[] = [];
  const nodeProblems: string[] = [];
  const hairpinEndpoints = new Map<string, string[]>();
  const families = new Set(options.families);
  const nodeAddresses = nodePortAddresses(inputs, options, nodeProblems).filter((address) => families.has(address.family));
  const context: ServiceContext = {
    options,
    families,
    refusal: options.validation && serviceAddressValidator(options.validation),
    node: { name: inputs.nodeName, zone: inputs.node?.metadata?.labels?.[ZONE_LABEL] },
    nodeAddresses,
  };
  const contextKey = JSON.stringify([options, context.node, nodeAddresses.map((address) => address.text)]);
  let services = 0;

  for (const svc of inputs.services) {
    const namespace = svc.metadata?.namespace ?? 'default';
    const name = svc.metadata?.name ?? '';
    const owner = `${namespace}/${name}`;
    if (serviceSkipReason(svc, options.serviceProxyName) !== undefined) continue;
    const outcome = cachedServiceOutcome(cache, svc, inputs.slicesFor(namespace, name), contextKey, (slices) => planService(svc, owner, slices, context));
    problems.push(...outcome.problems);
    refused.push(...outcome.refused);
    if (!outcome.programmed) continue;
    services++;
    // The first Service in the informer's order holds an address:port; a later one that claims it too is a problem.
    for (const server of outcome.virtualServers) {
      const other = virtualServers.get(server.id);
      if (other) {
        problems.push({ owner, reason: 'DuplicateServiceAddress', message: `${server.id} is also claimed by Service ${other.owner}; it stays with ${other.owner}` });
        continue;
      }
      virtualServers.set(server.id, server);
      if (server.kind !== 'node-port') vips[ipvsAddressFamily(server.service.address)].add(server.service.address);
    }
    if (outcome.healthCheck) healthChecks.push(outcome.healthCheck);
    for (const address of outcome.hairpinEndpoints) {
      const owners = hairpinEndpoints.get(address) ?? [];
      owners.push(owner);
      hairpinEndpoints.set(address, owners);
    }
  }
  return { virtualServers, vips, healthChecks, problems, refused, nodeProblems, services, hairpinEndpoints };
}

/** Per Service, what the last build computed from it: reused while the Service, its slices and the node are the same. */
export type ProxyModelCache = ServiceOutcomeCache<ServiceOutcome>;

/** What one Service contributes to the model, before the Services' claims on the same address are settled. */
interface ServiceOutcome {
  /** False when its annotations are invalid: not programmed, not counted. */
  readonly programmed: boolean;
  readonly virtualServers: readonly DesiredVirtualServer[];
  readonly problems: readonly ServiceProblem[];
  readonly refused: readonly ServiceProblem[];
  readonly healthCheck?: HealthCheckPort;
  /** Its local endpoints that need hairpin. */
  readonly hairpinEndpoints: readonly string[];
}

interface ServiceContext {
  readonly options: ModelOptions;
  readonly families: ReadonlySet<IpFamily>;
  readonly refusal: ((kind: ValidatedAddressKind, address: string) => string | undefined) | undefined;
  readonly node: { readonly name: string; readonly zone: string | undefined };
  /** Where NodePorts listen, of the node's families. */
  readonly nodeAddresses: readonly ParsedIp[];
}

function planService(svc: V1Service, owner: string, slices: readonly V1EndpointSlice[], context: ServiceContext): ServiceOutcome {
  const { options, families, refusal, nodeAddresses } = context;
  const problems: ServiceProblem[] = [];
  const refused: ServiceProblem[] = [];
  const virtualServers = new Map<string, DesiredVirtualServer>();
  const hairpinEndpoints: string[] = [];
  let healthCheck: HealthCheckPort | undefined;
  let scheduling: Scheduling;
  try {
    scheduling = schedulingOf(svc);
  } catch (error) {
    return { programmed: false, virtualServers: [], problems: [{ owner, reason: 'InvalidServiceAnnotation', message: (error as Error).message }], refused, hairpinEndpoints };
  }
  const annotations = svc.metadata?.annotations ?? {};
  const externalLocal = svc.spec?.externalTrafficPolicy === 'Local' || annotations[ANNOTATIONS.local] === 'true';
  const internalLocal = svc.spec?.internalTrafficPolicy === 'Local';
  const hairpin = options.hairpinMode === true || ANNOTATIONS.hairpin in annotations;
  const hairpinExternal = hairpin && ANNOTATIONS.hairpinExternalIps in annotations;
  const problem = (reason: string, message: string) => problems.push({ owner, reason, message });
  // One problem per bad slice entry, not one per Service port that reads it.
  const sliceProblems = new Set<string>();
  // Every address read strictly: one that is not an address as the kernel reads it (`010.0.0.1`, a zone) is a
  // problem of this Service (a Warning, a failed sync), never programmed as another address; its other addresses stand.
  const addresses = (kind: 'clusterip' | ValidatedAddressKind, candidates: readonly string[]): ParsedIp[] =>
    candidates.flatMap((text) => {
      const parsed = parseIp(text);
      if (!parsed) problem('InvalidServiceAddress', `${kind} ${JSON.stringify(text)} is not an IP address`);
      return parsed ? [parsed] : [];
    });
  // Only addresses of the node's families: an IPv6 LoadBalancer IP on an IPv4-only node is not refused, just unused.
  const ofFamilies = (parsed: readonly ParsedIp[]) => parsed.filter((address) => families.has(address.family));
  const validated = (kind: ValidatedAddressKind, parsed: readonly ParsedIp[]) =>
    ofFamilies(parsed).filter((address) => {
      const why = refusal?.(kind, address.text);
      if (why) refused.push({ owner, reason: 'InvalidServiceAddress', message: `${kind} ${address.text} is not programmed: ${why}` });
      return why === undefined;
    });
  const clusterIps = ofFamilies(addresses('clusterip', svc.spec?.clusterIPs?.length ? svc.spec.clusterIPs : [svc.spec?.clusterIP ?? '']));
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
  const sourceRanges = sourceRangesOf(svc, problem);
  const policy = (port: V1ServicePort): EndpointPolicy => ({
    internalLocal,
    externalLocal,
    externallyAccessible: externalIps.length > 0 || lbIps.length > 0 || hasNodePort(svc, port),
  });
  const endpointNode = context.node;
  let localEndpointsForHealth = 0;

  for (const port of svc.spec?.ports ?? []) {
    const label = `port ${JSON.stringify(port.name ?? String(port.port))}`;
    const protocol = PROTOCOLS.get(port.protocol ?? 'TCP');
    if (!protocol) {
      problem('UnsupportedProtocol', `${label}: protocol ${JSON.stringify(port.protocol)} is not supported by IPVS`);
      continue;
    }
    const badPort = portProblem(port);
    if (badPort) {
      problem('InvalidServicePort', `${label}: ${badPort}; the port is not programmed`);
      continue;
    }
    const read = servicePortEndpoints(slices, { name: port.name ?? '', protocol: port.protocol ?? 'TCP' }, context.node.name);
    for (const { slice, message } of read.problems) {
      const text = `EndpointSlice ${slice}: ${message}`;
      if (!sliceProblems.has(text)) problem('InvalidEndpointSlice', text);
      sliceProblems.add(text);
    }
    // Chosen per family, as kube-proxy's proxier of each family does: ready endpoints, serving terminating ones only
    // when no ready one exists (KEP-1669), per traffic policy, narrowed by topology hints.
    const byFamily = new Map<IpFamily, EndpointCategories>();
    const chosen = (family: IpFamily): EndpointCategories => {
      let categories = byFamily.get(family);
      if (!categories) {
        categories = categorizeEndpoints(read.endpoints.filter((endpoint) => endpoint.family === family), policy(port), endpointNode);
        byFamily.set(family, categories);
      }
      return categories;
    };
    if (hairpin) {
      // As kube-router's syncHairpinIptablesRules: only local endpoints, only of a family the Service has a cluster IP of.
      for (const family of new Set(clusterIps.map((ip) => ip.family))) {
        for (const endpoint of chosen(family).allReachable) {
          if (endpoint.local && !hairpinEndpoints.includes(endpoint.address)) hairpinEndpoints.push(endpoint.address);
        }
      }
    }
    // The health check counts ready local endpoints only: a node whose pods all terminate fails it, so that the
    // load balancer drains it while they finish (KEP-1669).
    localEndpointsForHealth = Math.max(localEndpointsForHealth, read.endpoints.filter((endpoint) => endpoint.local && endpoint.ready && !endpoint.terminating).length);
    const add = (kind: VirtualServerKind, address: ParsedIp, servicePort: number, local: boolean) => {
      const { family, text } = address;
      const key = { protocol, address: text, port: servicePort };
      const id = ipvsServiceId(key);
      // Claimed twice by this Service (a cluster IP also among its external IPs): the first claim stands. Another
      // Service's claim is settled when the Services are put together.
      if (virtualServers.has(id)) return;
      const categories = chosen(family);
      const destinations = uniqueDestinations(
        (local ? categories.local : categories.cluster).map((endpoint: ServiceEndpoint): IpvsDestination => ({ address: endpoint.address, port: endpoint.port, forwarding: 'masquerade', weight: 1 })),
      );
      const ranges = kind === 'load-balancer' ? sourceRanges.get(family) : undefined;
      virtualServers.set(id, {
        id,
        owner,
        portName: port.name ?? '',
        kind,
        service: { ...key, ...scheduling },
        destinations,
        preserveClientAddress: local && kind !== 'cluster-ip',
        hairpin: kind === 'cluster-ip' ? hairpin : kind !== 'node-port' && hairpinExternal,
        ...(destinations.length === 0 && { noEndpoints: categories.hasAnyEndpoints ? 'drop' : 'reject' }),
        ...(ranges !== undefined && { sourceRanges: ranges }),
      });
    };
    for (const ip of clusterIps) add('cluster-ip', ip, port.port, internalLocal);
    for (const ip of externalIps) add('external-ip', ip, port.port, externalLocal);
    for (const ip of lbIps) add('load-balancer', ip, port.port, externalLocal);
    if (port.nodePort && hasNodePort(svc, port)) {
      for (const address of nodeAddresses) add('node-port', address, port.nodePort, externalLocal);
    }
  }
  const healthCheckNodePort = svc.spec?.healthCheckNodePort;
  if (healthCheckNodePort && svc.spec?.type === 'LoadBalancer' && externalLocal) {
    if (isPort(healthCheckNodePort)) healthCheck = { owner, port: healthCheckNodePort, localEndpoints: localEndpointsForHealth };
    else problem('InvalidServicePort', `healthCheckNodePort ${healthCheckNodePort} is outside ${PORT_RANGE}; no health check server is started`);
  }
  return { programmed: true, virtualServers: [...virtualServers.values()], problems, refused, ...(healthCheck && { healthCheck }), hairpinEndpoints };
}

/**
 * Why a Service port cannot be programmed, or undefined. A nodePort of 0 is no node port (a LoadBalancer with
 * allocateLoadBalancerNodePorts false has none); a named targetPort is resolved by the EndpointSlices.
 */
function portProblem(port: V1ServicePort): string | undefined {
  if (!isPort(port.port)) return `port ${port.port} is outside ${PORT_RANGE}`;
  if (port.nodePort !== undefined && port.nodePort !== 0 && !isPort(port.nodePort)) return `nodePort ${port.nodePort} is outside ${PORT_RANGE}`;
  if (typeof port.targetPort === 'number' && !isPort(port.targetPort)) return `targetPort ${port.targetPort} is outside ${PORT_RANGE}`;
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

function hasNodePort(svc: V1Service, port: V1ServicePort): boolean {
  return Boolean(port.nodePort) && (svc.spec?.type === 'NodePort' || svc.spec?.type === 'LoadBalancer');
}

/**
 * `spec.loadBalancerSourceRanges` by family, as networks in canonical text (host bits cleared, as ipset stores them).
 * A range that is not a CIDR is a problem of the Service and left out; the Service's LoadBalancer IPs then admit only
 * the good ranges (fail closed, as a typo must not open the Service to everyone). A /0 admits every client of its
 * family, so that family gets no filter at all.
 */
function sourceRangesOf(svc: V1Service, problem: (reason: string, message: string) => void): Map<IpFamily, readonly string[]> {
  const out = new Map<IpFamily, string[]>();
  const everyone = new Set<IpFamily>();
  if (svc.spec?.type !== 'LoadBalancer') return out;
  for (const raw of svc.spec.loadBalancerSourceRanges ?? []) {
    const text = raw.trim();
    const cidr = parseCidr(text);
    if (!cidr) {
      problem('InvalidServiceSourceRange', `loadBalancerSourceRanges ${JSON.stringify(raw)} is not a CIDR; it admits nobody`);
      continue;
    }
    if (cidr.prefixLength === 0) everyone.add(cidr.family);
    const ranges = out.get(cidr.family) ?? [];
    if (!ranges.includes(cidr.cidr)) ranges.push(cidr.cidr);
    out.set(cidr.family, ranges);
  }
  // A family the Service names no range of is closed to every client once it names one of another family, as
  // kube-proxy's per-family proxier reads the list (it keeps the ranges of its own family, none at all for the other).
  if ((svc.spec.loadBalancerSourceRanges ?? []).length > 0) {
    for (const family of ['ipv4', 'ipv6'] as const) if (!out.has(family)) out.set(family, []);
  }
  for (const family of everyone) out.delete(family);
  return out;
}

function uniqueDestinations(destinations: IpvsDestination[]): IpvsDestination[] {
  const seen = new Map<string, IpvsDestination>();
  for (const destination of destinations) seen.set(`${destination.address}:${destination.port}`, destination);
  return [...seen.values()];
}

/**
 * Where NodePorts listen. The kernel's own addresses are trusted text; the Node's are read strictly like a Service's,
 * and one that is not an address is reported (the Node is not a Service, so a failed sync without a Service event).
 */
function nodePortAddresses(inputs: ModelInputs, options: ModelOptions, nodeProblems: string[]): ParsedIp[] {
  const unique = (addresses: ParsedIp[]) => [...new Map(addresses.map((address) => [address.text, address])).values()];
  if (options.nodePortBindOnAllIp) return unique(inputs.localAddresses.flatMap((text) => parseIp(text) ?? []));
  const addresses: ParsedIp[] = [];
  for (const entry of inputs.node?.status?.addresses ?? []) {
    if (entry.type !== 'InternalIP' && entry.type !== 'ExternalIP') continue;
    const parsed = parseIp(entry.address);
    if (parsed) addresses.push(parsed);
    else nodeProblems.push(`node ${inputs.nodeName}: ${entry.type} ${JSON.stringify(entry.address)} is not an IP address; no NodePort listens on it`);
  }
  return unique(addresses);
}
