import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { cachedServiceOutcome, categorizeEndpoints, inCidrs, parseCidr, parseCidrs, parseIp, serviceAddressValidator, servicePortEndpoints, serviceSkipReason } from '@kube-router/kube';
import type { EndpointCategories, HealthCheckPort, IpFamily, ParsedIp, ServiceAddressRanges, ServiceOutcomeCache, ValidatedAddressKind } from '@kube-router/kube';
import { ANNOTATIONS } from './names.js';

export type NftProtocol = 'tcp' | 'udp' | 'sctp';

/** One Service port in one family: everything its chains, map elements and conntrack cleanup need. */
export interface ServicePortPlan {
  /** `namespace/name` of the Service. */
  readonly owner: string;
  readonly portName: string;
  readonly protocol: NftProtocol;
  readonly family: IpFamily;
  readonly clusterIp: string;
  readonly port: number;
  readonly externalIps: readonly string[];
  readonly loadBalancerIps: readonly string[];
  /** 0: none. */
  readonly nodePort: number;
  /** loadBalancerSourceRanges of this family (canonical CIDRs); empty: every source. */
  readonly sourceRanges: readonly string[];
  /**
   * The Service has loadBalancerSourceRanges (of any family): its LoadBalancer IPs admit only sourceRanges, none when
   * this family has no range of its own.
   */
  readonly firewalled: boolean;
  /** One of the Node's own addresses lies in sourceRanges: the LoadBalancer IPs themselves are allowed sources too (kube-proxy). */
  readonly allowLoadBalancerIpsAsSources: boolean;
  readonly internalLocal: boolean;
  readonly externalLocal: boolean;
  readonly externallyAccessible: boolean;
  /** sessionAffinity ClientIP: its timeout in seconds. */
  readonly affinitySeconds: number | undefined;
  readonly endpoints: EndpointCategories;
  /**
   * Every serving endpoint of the port in this family, whatever the policies, topology or terminating status: UDP flows
   * to these keep their conntrack entries (kube-proxy's conntrack cleanup).
   */
  readonly servingAddresses: readonly string[];
}

export interface ServiceProblem {
  readonly owner: string;
  readonly reason: string;
  readonly message: string;
}

export interface ProxyModel {
  readonly ports: Readonly<Record<IpFamily, readonly ServicePortPlan[]>>;
  /** The same plans by Service (`namespace/name`); an unchanged Service keeps its array from build to build (ModelCache). */
  readonly groups: Readonly<Record<IpFamily, ReadonlyMap<string, readonly ServicePortPlan[]>>>;
  /** The addresses NodePorts answer on, by family (unused with nodePortBindOnAllIp: every local address answers). */
  readonly nodePortAddresses: Readonly<Record<IpFamily, readonly string[]>>;
  readonly healthChecks: readonly HealthCheckPort[];
  /** Each fails the sync and is a Warning event on its Service. */
  readonly problems: readonly ServiceProblem[];
  /** Addresses strict validation kept out: a Warning each, no failure (as proxy-ipvs). */
  readonly refused: readonly ServiceProblem[];
  readonly nodeProblems: readonly string[];
  /** Services programmed. */
  readonly services: number;
}

export interface ModelInputs {
  readonly services: readonly V1Service[];
  readonly slicesFor: (namespace: string, name: string) => readonly V1EndpointSlice[];
  readonly node: V1Node | undefined;
  readonly nodeName: string;
}

export interface ModelOptions {
  readonly families: readonly IpFamily[];
  readonly nodePortBindOnAllIp: boolean;
  readonly serviceProxyName: string;
  /** --strict-external-ip-validation with its ranges; undefined programs every externalIP and LoadBalancer IP. */
  readonly validation?: ServiceAddressRanges;
}

const DEFAULT_AFFINITY_SECONDS = 10_800;
const PROTOCOLS: ReadonlyMap<string, NftProtocol> = new Map([
  ['TCP', 'tcp'],
  ['UDP', 'udp'],
  ['SCTP', 'sctp'],
]);
const ZONE_LABEL = 'topology.kubernetes.io/zone';
const SOURCE_RANGES_ANNOTATION = 'service.beta.kubernetes.io/load-balancer-source-ranges';
/** The schedulers this backend can honour: nftables picks endpoints at random, which is what round robin is for. */
const ACCEPTED_SCHEDULERS = new Set(['', 'rr']);

function isPort(value: number | undefined): value is number {
  return value !== undefined && Number.isInteger(value) && value >= 1 && value <= 65_535;
}

/**
 * Why this backend refuses a Service as a whole, or undefined: kube-router annotations that only IPVS can honour are
 * refused with a Warning rather than silently ignored.
 */
function refusalOf(svc: V1Service): string | undefined {
  const annotations = svc.metadata?.annotations ?? {};
  const scheduler = annotations[ANNOTATIONS.scheduler];
  if (scheduler !== undefined && !ACCEPTED_SCHEDULERS.has(scheduler.trim())) {
    return `${ANNOTATIONS.scheduler}: ${JSON.stringify(scheduler)} is an IPVS scheduler; the nftables proxy balances at random (rr) only`;
  }
  if (annotations[ANNOTATIONS.dsr] !== undefined) return `${ANNOTATIONS.dsr}: direct server return needs IPVS; the nftables proxy does not do it`;
  return undefined;
}

/**
 * Computes what this node's tables should hold from Services, EndpointSlices and its Node: pure, so that every rule of
 * the proxy is unit-tested without a kernel. A Service with bad input becomes a problem and is left out; it never stops
 * the others.
 */
export function buildProxyModel(inputs: ModelInputs, options: ModelOptions, cache?: ModelCache): ProxyModel {
  const ports: Record<IpFamily, ServicePortPlan[]> = { ipv4: [], ipv6: [] };
  const groups: Record<IpFamily, Map<string, readonly ServicePortPlan[]>> = { ipv4: new Map(), ipv6: new Map() };
  const problems: ServiceProblem[] = [];
  const refused: ServiceProblem[] = [];
  const nodeProblems: string[] = [];
  const healthChecks: HealthCheckPort[] = [];
  // The Node's InternalIP/ExternalIP: where NodePorts answer (unless every address does), and always what decides
  // whether LoadBalancer IPs are allowed sources (kube-proxy checks the node IPs whatever nodePortAddresses says).
  const nodeIps = nodeAddressesOf(inputs, options.nodePortBindOnAllIp ? [] : nodeProblems);
  const nodeAddresses = options.nodePortBindOnAllIp ? [] : nodeIps;
  const nodePortAddresses: Record<IpFamily, string[]> = {
    ipv4: nodeAddresses.filter((address) => address.family === 'ipv4').map((address) => address.text),
    ipv6: nodeAddresses.filter((address) => address.family === 'ipv6').map((address) => address.text),
  };
  const context: ServiceContext = {
    options,
    families: new Set(options.families),
    refusal: options.validation && serviceAddressValidator(options.validation),
    node: { name: inputs.nodeName, zone: inputs.node?.metadata?.labels?.[ZONE_LABEL] },
    nodePortAddresses,
    nodeIps: nodeIps.map((address) => address.text),
  };
  const contextKey = JSON.stringify([options, inputs.nodeName, context.node.zone, nodePortAddresses, context.nodeIps]);
  // Who holds each address:protocol:port (and each NodePort): the first Service in name order; the others are problems.
  const claims = new Map<string, string>();
  let services = 0;

  const sorted = [...inputs.services].sort((a, b) => ownerOf(a).localeCompare(ownerOf(b)));
  for (const svc of sorted) {
    const owner = ownerOf(svc);
    const [namespace = '', name = ''] = owner.split('/');
    const slices = inputs.slicesFor(namespace, name);
    // An unchanged Service (the informer's same object) with unchanged slices is not computed again: an event sync
    // costs what its change costs, not what the cluster has.
    const outcome = cachedServiceOutcome(cache, svc, slices, contextKey, () => planService(svc, owner, slices, context));
    if (outcome === undefined) continue;
    problems.push(...outcome.problems);
    refused.push(...outcome.refused);
    if (!outcome.plans) continue;
    services++;
    for (const family of options.families) {
      const planned = outcome.plans[family];
      if (planned.length === 0) continue;
      const kept = planned.filter((plan) => {
        const keys = claimKeys(plan);
        const taken = keys.map((key) => claims.get(key)).find((holder) => holder !== undefined && holder !== owner);
        if (taken) {
          problems.push({ owner, reason: 'DuplicateServiceAddress', message: `${plan.family} ${plan.protocol} port ${plan.port} (or its NodePort ${plan.nodePort}) is also claimed by Service ${taken}; it stays with ${taken}` });
          return false;
        }
        for (const key of keys) claims.set(key, owner);
        return true;
      });
      // The same array when nothing was left out, so that the rendering of an unchanged Service is reused too.
      const group = kept.length === planned.length ? planned : kept;
      if (group.length > 0) groups[family].set(owner, group);
      ports[family].push(...group);
    }
    if (outcome.healthCheck) healthChecks.push(outcome.healthCheck);
  }
  return { ports, groups, nodePortAddresses, healthChecks, problems, refused, nodeProblems, services };
}

/** Per Service, what the last build computed from it: reused while the Service, its slices and the node are the same. */
export type ModelCache = ServiceOutcomeCache<ServiceOutcome | undefined>;

export function createModelCache(): ModelCache {
  return new WeakMap();
}

interface ServiceContext {
  readonly options: ModelOptions;
  readonly families: ReadonlySet<IpFamily>;
  readonly refusal: ((kind: ValidatedAddressKind, address: string) => string | undefined) | undefined;
  readonly node: { readonly name: string; readonly zone: string | undefined };
  readonly nodePortAddresses: Readonly<Record<IpFamily, readonly string[]>>;
  readonly nodeIps: readonly string[];
}

/** One Service's plans (undefined: refused or failed closed), problems and health check; undefined when it is skipped. */
interface ServiceOutcome {
  readonly problems: readonly ServiceProblem[];
  readonly refused: readonly ServiceProblem[];
  readonly plans: Readonly<Record<IpFamily, readonly ServicePortPlan[]>> | undefined;
  readonly healthCheck: HealthCheckPort | undefined;
}

function planService(svc: V1Service, owner: string, slices: readonly V1EndpointSlice[], context: ServiceContext): ServiceOutcome | undefined {
  const { options, families, refusal, node, nodeIps } = context;
  const refused: ServiceProblem[] = [];
  if (serviceSkipReason(svc, options.serviceProxyName) !== undefined) return undefined;
  const refusedWhy = refusalOf(svc);
  if (refusedWhy) return { problems: [{ owner, reason: 'UnsupportedServiceAnnotation', message: refusedWhy }], refused, plans: undefined, healthCheck: undefined };
  const serviceProblems: ServiceProblem[] = [];
  const problem = (reason: string, message: string) => serviceProblems.push({ owner, reason, message });
  const annotations = svc.metadata?.annotations ?? {};
  const spec = svc.spec ?? {};
  const addresses = (kind: string, candidates: readonly string[]): ParsedIp[] =>
    candidates.flatMap((text) => {
      const parsed = parseIp(text);
      if (!parsed) problem('InvalidServiceAddress', `${kind} ${JSON.stringify(text)} is not an IP address`);
      return parsed ? [parsed] : [];
    });
  const validated = (kind: ValidatedAddressKind, parsed: readonly ParsedIp[]) =>
    parsed.filter((address) => {
      const why = families.has(address.family) ? refusal?.(kind, address.text) : undefined;
      if (why) refused.push({ owner, reason: 'InvalidServiceAddress', message: `${kind} ${address.text} is not programmed: ${why}` });
      return why === undefined;
    });
  const clusterIps = addresses('clusterIP', spec.clusterIPs?.length ? spec.clusterIPs : [spec.clusterIP ?? '']);
  const externalIps = validated('externalip', addresses('externalIP', spec.externalIPs ?? []));
  const skipLbIps = ANNOTATIONS.skipLoadBalancerIps in annotations;
  const lbIps = validated(
    'loadbalancerip',
    skipLbIps
      ? []
      : addresses(
          'loadBalancer ingress IP',
          (svc.status?.loadBalancer?.ingress ?? []).filter((ingress) => ingress.ip && ingress.ipMode !== 'Proxy').map((ingress) => ingress.ip as string),
        ),
  );
  const sourceRanges = sourceRangesOf(svc, problem);
  const affinitySeconds = spec.sessionAffinity === 'ClientIP' ? (spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? DEFAULT_AFFINITY_SECONDS) : undefined;
  if (affinitySeconds !== undefined && !(Number.isInteger(affinitySeconds) && affinitySeconds >= 1 && affinitySeconds <= 86_400)) {
    problem('InvalidServiceAffinity', `sessionAffinityConfig.clientIP.timeoutSeconds ${affinitySeconds} is outside 1-86400`);
  }
  const externalLocal = spec.externalTrafficPolicy === 'Local' || annotations[ANNOTATIONS.local] === 'true';
  const internalLocal = spec.internalTrafficPolicy === 'Local';
  const hasNodePorts = spec.type === 'NodePort' || spec.type === 'LoadBalancer';
  const planned: ServicePortPlan[] = [];
  let localEndpointsForHealth = 0;

  for (const port of spec.ports ?? []) {
    const label = `port ${JSON.stringify(port.name ?? String(port.port))}`;
    const protocol = PROTOCOLS.get(port.protocol ?? 'TCP');
    if (!protocol) {
      problem('UnsupportedProtocol', `${label}: protocol ${JSON.stringify(port.protocol)} is not supported`);
      continue;
    }
    if (!isPort(port.port)) {
      problem('InvalidServicePort', `${label}: port ${port.port} is outside 1-65535`);
      continue;
    }
    const nodePort = hasNodePorts && port.nodePort ? port.nodePort : 0;
    if (nodePort !== 0 && !isPort(nodePort)) {
      problem('InvalidServicePort', `${label}: nodePort ${nodePort} is outside 1-65535`);
      continue;
    }
    const read = servicePortEndpoints(slices, { name: port.name ?? '', protocol: port.protocol ?? 'TCP' }, node.name);
    for (const bad of read.problems) problem('InvalidEndpointSlice', `EndpointSlice ${bad.slice}: ${bad.message}`);
    for (const family of options.families) {
      const clusterIp = clusterIps.find((ip) => ip.family === family);
      if (!clusterIp) continue;
      const ofFamily = (list: readonly ParsedIp[]) => [...new Set(list.filter((ip) => ip.family === family).map((ip) => ip.text))];
      const familyExternal = ofFamily(externalIps);
      const familyLb = ofFamily(lbIps);
      const externallyAccessible = nodePort !== 0 || familyExternal.length > 0 || familyLb.length > 0;
      const policy = { internalLocal, externalLocal, externallyAccessible };
      const familyEndpoints = read.endpoints.filter((endpoint) => endpoint.family === family);
      const endpoints = categorizeEndpoints(familyEndpoints, policy, node);
      localEndpointsForHealth = Math.max(localEndpointsForHealth, endpoints.local.filter((endpoint) => endpoint.ready).length);
      const ranges = sourceRanges.filter((range) => range.family === family).map((range) => range.cidr);
      const parsedRanges = parseCidrs(ranges);
      planned.push({
        owner,
        portName: port.name ?? '',
        protocol,
        family,
        clusterIp: clusterIp.text,
        port: port.port,
        externalIps: familyExternal,
        loadBalancerIps: familyLb,
        nodePort,
        sourceRanges: ranges,
        firewalled: sourceRanges.length > 0,
        allowLoadBalancerIpsAsSources: nodeIps.some((address) => inCidrs(address, parsedRanges)),
        ...policy,
        affinitySeconds,
        endpoints,
        servingAddresses: [...new Set(familyEndpoints.filter((endpoint) => endpoint.serving).map((endpoint) => endpoint.address))],
      });
    }
  }
  if (serviceProblems.some((entry) => entry.reason === 'InvalidLoadBalancerSourceRange' || entry.reason === 'InvalidServiceAffinity')) {
    // Programming it without the ranges would open it to every source, and without affinity would break its clients'
    // sessions: the Service fails closed, alone.
    return { problems: serviceProblems, refused, plans: undefined, healthCheck: undefined };
  }
  let healthCheck: HealthCheckPort | undefined;
  const healthCheckNodePort = spec.healthCheckNodePort;
  if (healthCheckNodePort && spec.type === 'LoadBalancer' && externalLocal) {
    if (isPort(healthCheckNodePort)) healthCheck = { owner, port: healthCheckNodePort, localEndpoints: localEndpointsForHealth };
    else serviceProblems.push({ owner, reason: 'InvalidServicePort', message: `healthCheckNodePort ${healthCheckNodePort} is outside 1-65535; no health check server is started` });
  }
  return {
    problems: serviceProblems,
    refused,
    plans: { ipv4: planned.filter((plan) => plan.family === 'ipv4'), ipv6: planned.filter((plan) => plan.family === 'ipv6') },
    healthCheck,
  };
}

function ownerOf(svc: V1Service): string {
  return `${svc.metadata?.namespace ?? 'default'}/${svc.metadata?.name ?? ''}`;
}

/** The map keys a Service port takes; two Services taking one would make the kernel refuse the whole transaction. */
function claimKeys(plan: ServicePortPlan): string[] {
  const keys = [plan.clusterIp, ...plan.externalIps, ...plan.loadBalancerIps].map((address) => `${plan.family}|${address}|${plan.protocol}|${plan.port}`);
  if (plan.nodePort !== 0) keys.push(`${plan.family}|nodeport|${plan.protocol}|${plan.nodePort}`);
  return keys;
}

/** spec.loadBalancerSourceRanges, else the legacy annotation (as kube-proxy reads them); a bad one is a problem. */
function sourceRangesOf(svc: V1Service, problem: (reason: string, message: string) => void) {
  const fromSpec = svc.spec?.loadBalancerSourceRanges ?? [];
  const texts = fromSpec.length > 0 ? fromSpec : (svc.metadata?.annotations?.[SOURCE_RANGES_ANNOTATION] ?? '').split(',');
  const out: { family: IpFamily; cidr: string }[] = [];
  for (const raw of texts) {
    const text = raw.trim();
    if (text === '') continue;
    const parsed = parseCidr(text);
    if (!parsed) {
      problem('InvalidLoadBalancerSourceRange', `loadBalancerSourceRanges ${JSON.stringify(text)} is not a CIDR; the Service is not programmed`);
      continue;
    }
    if (!out.some((entry) => entry.cidr === parsed.cidr)) out.push({ family: parsed.family, cidr: parsed.cidr });
  }
  return out;
}

/** The Node's InternalIP and ExternalIP addresses, where NodePorts answer. */
function nodeAddressesOf(inputs: ModelInputs, nodeProblems: string[]): ParsedIp[] {
  const addresses = new Map<string, ParsedIp>();
  for (const entry of inputs.node?.status?.addresses ?? []) {
    if (entry.type !== 'InternalIP' && entry.type !== 'ExternalIP') continue;
    const parsed = parseIp(entry.address);
    if (parsed) addresses.set(parsed.text, parsed);
    else nodeProblems.push(`node ${inputs.nodeName}: ${entry.type} ${JSON.stringify(entry.address)} is not an IP address; no NodePort answers on it`);
  }
  return [...addresses.values()];
}
