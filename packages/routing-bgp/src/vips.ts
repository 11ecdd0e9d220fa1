import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { SyncFailures } from '@kube-router/controller';
import { isIp, parseIp, serviceAddressValidator } from '@kube-router/kube';
import type { ServiceAddressRanges } from '@kube-router/kube';
import type { ApiPath } from './gobgp-api.js';
import { AFI_OF, familyOf, type Family } from './nodes.js';
import { canonicalAddress } from './parse.js';
import { isLocalPath, isUnicast, pathNextHop, pathPrefix, podCidrPath } from './paths.js';

/** kube-router's per-Service annotations: "true"/"false" override the --advertise-* flag of that kind of address. */
export const ADVERTISE_CLUSTER_IP_ANNOTATION = 'kube-router.io/service.advertise.clusterip';
export const ADVERTISE_EXTERNAL_IP_ANNOTATION = 'kube-router.io/service.advertise.externalip';
export const ADVERTISE_LOADBALANCER_IP_ANNOTATION = 'kube-router.io/service.advertise.loadbalancerip';
/** kube-router's older spelling of externalTrafficPolicy: Local. */
export const SERVICE_LOCAL_ANNOTATION = 'kube-router.io/service.local';
/** Deprecated in kube-router in favour of service.advertise.loadbalancerip=false; still honoured there and here. */
export const SKIP_LOADBALANCER_IPS_ANNOTATION = 'kube-router.io/service.skiplbips';

export interface VipFlags {
  /** --advertise-cluster-ip. */
  advertiseClusterIp: boolean;
  /** --advertise-external-ip. */
  advertiseExternalIp: boolean;
  /** --advertise-loadbalancer-ip. */
  advertiseLoadBalancerIp: boolean;
}

/** Something wrong with one Service: it gets a Warning event and is a failure of the sync; its other addresses still count. */
export interface VipProblem {
  service: V1Service;
  reason: 'InvalidAnnotation' | 'InvalidServiceAddress';
  message: string;
}

export interface VipPlan {
  /** The host prefixes (`a.b.c.d/32`, `x::y/128`) this node announces, whichever Services they come from. */
  advertise: Set<string>;
  problems: VipProblem[];
  /**
   * Addresses strict validation kept from being announced: a Warning each, as kube-router logs them, but no failure
   * of the sync (the Service is as its owner wrote it, and the rest is announced).
   */
  refused: VipProblem[];
}

/**
 * kube-router's --strict-external-ip-validation (`serviceAddressValidator` in @kube-router/kube): externalIPs must lie
 * in --service-external-ip-range and LoadBalancer ingress IPs in --loadbalancer-ip-range, neither in
 * --service-cluster-ip-range; with no range of a kind, no address of that kind is announced (default deny). Each
 * refused address gets a Warning on its Service.
 */
export type VipAddressValidation = ServiceAddressRanges;

export interface VipPlanInput {
  services: readonly V1Service[];
  slicesFor(namespace: string, service: string): readonly V1EndpointSlice[];
  nodeName: string;
  /** This node's addresses: an endpoint without a nodeName is local when it has one of them (host-network pods). */
  nodeAddresses: readonly string[];
  flags: VipFlags;
  /** Strict validation of externalIPs and LoadBalancer IPs; undefined announces them all (no validation). */
  validation?: VipAddressValidation;
}

type AddressKind = 'clusterip' | 'externalip' | 'loadbalancerip';

const ANNOTATION_OF: Record<AddressKind, string> = {
  clusterip: ADVERTISE_CLUSTER_IP_ANNOTATION,
  externalip: ADVERTISE_EXTERNAL_IP_ANNOTATION,
  loadbalancerip: ADVERTISE_LOADBALANCER_IP_ANNOTATION,
};

// Go's strconv.ParseBool, which kube-router reads these annotations with.
const TRUE_VALUES = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const FALSE_VALUES = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

/**
 * Which Service addresses this node announces, as kube-router's getVIPs: ClusterIPs, externalIPs and LoadBalancer
 * ingress IPs of every Service with a cluster IP (ExternalName and headless Services have none), each kind by its
 * flag unless the Service's annotation says otherwise, and none that a Local traffic policy keeps off a node without a
 * local endpoint. An address wanted by any Service is announced, even if another Service sharing it is not.
 */
export function planServiceVips(input: VipPlanInput): VipPlan {
  const advertise = new Set<string>();
  const problems: VipProblem[] = [];
  const refused: VipProblem[] = [];
  const refusal = input.validation && serviceAddressValidator(input.validation);
  const nodeAddresses = new Set(input.nodeAddresses.map(canonicalAddress));
  for (const service of input.services) {
    const namespace = service.metadata?.namespace ?? '';
    const name = service.metadata?.name ?? '';
    const spec = service.spec ?? {};
    if (spec.type === 'ExternalName' || !spec.clusterIP || spec.clusterIP === 'None') continue;
    const annotations = service.metadata?.annotations ?? {};
    const problem = (reason: VipProblem['reason'], message: string) => problems.push({ service, reason, message });

    let local: boolean | undefined;
    const hasLocalEndpoint = () =>
      (local ??= input.slicesFor(namespace, name).some((slice) => sliceHasLocalEndpoint(slice, input.nodeName, nodeAddresses)));
    const wanted = (kind: AddressKind, flag: boolean): boolean => {
      const annotation = ANNOTATION_OF[kind];
      const value = annotations[annotation];
      let advertised = flag;
      if (value !== undefined) {
        if (TRUE_VALUES.has(value.trim())) advertised = true;
        else if (FALSE_VALUES.has(value.trim())) advertised = false;
        else problem('InvalidAnnotation', `${annotation}: ${JSON.stringify(value)} is not true or false; the flag's ${flag} applies`);
      }
      if (!advertised) return false;
      const localOnly =
        kind === 'clusterip'
          ? spec.internalTrafficPolicy === 'Local'
          : spec.externalTrafficPolicy === 'Local' || annotations[SERVICE_LOCAL_ANNOTATION] === 'true';
      return !localOnly || hasLocalEndpoint();
    };
    const add = (kind: AddressKind, addresses: readonly string[]) => {
      for (const address of addresses) {
        if (!isIp(address)) {
          problem('InvalidServiceAddress', `${kind} ${JSON.stringify(address)} is not an IP address`);
          continue;
        }
        if (refusal && kind !== 'clusterip') {
          const why = refusal(kind, address);
          if (why) {
            refused.push({ service, reason: 'InvalidServiceAddress', message: `${kind} ${address} is not announced: ${why}` });
            continue;
          }
        }
        advertise.add(hostPrefix(address));
      }
    };

    const clusterIps = [...new Set([...(spec.clusterIPs ?? []), spec.clusterIP])];
    if (wanted('clusterip', input.flags.advertiseClusterIp)) add('clusterip', clusterIps);
    const externalIps = spec.externalIPs ?? [];
    if (externalIps.length > 0 && wanted('externalip', input.flags.advertiseExternalIp)) add('externalip', externalIps);
    const ingressIps =
      spec.type === 'LoadBalancer'
        ? (service.status?.loadBalancer?.ingress ?? []).filter((i) => i.ip && i.ipMode !== 'Proxy').map((i) => i.ip!)
        : [];
    if (ingressIps.length > 0 && !(SKIP_LOADBALANCER_IPS_ANNOTATION in annotations) && wanted('loadbalancerip', input.flags.advertiseLoadBalancerIp)) {
      add('loadbalancerip', ingressIps);
    }
  }
  return { advertise, problems, refused };
}

/**
 * Whether a slice has an endpoint of this node that can serve: kube-router counts any endpoint on the node; a
 * not-ready one is left out here, since a Local policy would send traffic to this node that it cannot serve.
 */
function sliceHasLocalEndpoint(slice: V1EndpointSlice, nodeName: string, nodeAddresses: ReadonlySet<string>): boolean {
  return (slice.endpoints ?? []).some((endpoint) => {
    if (endpoint.conditions?.ready === false) return false;
    if (endpoint.nodeName) return endpoint.nodeName === nodeName;
    return endpoint.addresses.some((address) => nodeAddresses.has(canonicalAddress(address)));
  });
}

/** `a.b.c.d/32` or `x::y/128`: the path kube-router announces for a Service address. */
export function hostPrefix(address: string): string {
  const parsed = parseIp(address);
  if (parsed === undefined) throw new Error(`${JSON.stringify(address)} is not an IP address`);
  return `${parsed.text}/${parsed.family === 'ipv6' ? 128 : 32}`;
}

function isHostPrefix(prefix: string): boolean {
  return prefix.endsWith(prefix.includes(':') ? '/128' : '/32');
}

/**
 * The locally originated paths of the VIP stage: host routes that are not one of the node's pod CIDRs. The pod CIDR
 * stage leaves them alone and this stage leaves pod CIDRs alone, so the two never withdraw each other's paths.
 */
export function isVipPath(path: ApiPath, podCidrs: ReadonlySet<string>): boolean {
  const prefix = pathPrefix(path);
  return !!prefix && isLocalPath(path) && !path.isWithdraw && isHostPrefix(prefix) && !podCidrs.has(prefix);
}

export interface VipGobgp {
  listGlobalPaths(afi: 'AFI_IP' | 'AFI_IP6'): Promise<ApiPath[]>;
  addPath(path: ApiPath): Promise<unknown>;
  deletePath(path: ApiPath): Promise<unknown>;
  /** All or nothing; a path with `isWithdraw` is withdrawn. */
  addPathsInBulk(paths: readonly ApiPath[]): Promise<unknown>;
}

export interface VipChange {
  prefix: string;
  change: 'advertised' | 'withdrawn';
}

const FAMILIES: readonly Family[] = ['ipv4', 'ipv6'];

/**
 * Announces the wanted VIPs with this node's address of their family as next hop and withdraws the VIP paths no longer
 * wanted, reconciled against gobgpd's own RIB (level-triggered: a restarted gobgpd is given them all back). Every
 * advertisement and withdrawal is attempted; their failures are joined.
 */
export class VipAdvertiser {
  /** The VIP paths in gobgpd's RIB after the last reconcile; undefined until gobgpd was first listed. */
  #announced: Set<string> | undefined;

  constructor(
    private readonly gobgp: () => VipGobgp,
    private readonly onChange: (change: VipChange) => void = () => undefined,
  ) {}

  /**
   * What is announced now, listing gobgpd once if this advertiser never has. The export policy must still let these
   * through while they are withdrawn: gobgpd sends a withdrawal only for a path its policy exports.
   */
  async announced(podCidrs: ReadonlySet<string>): Promise<ReadonlySet<string>> {
    if (!this.#announced) {
      const found = new Set<string>();
      for (const family of FAMILIES) {
        for (const path of await this.gobgp().listGlobalPaths(AFI_OF[family])) {
          if (isVipPath(path, podCidrs)) found.add(pathPrefix(path)!);
        }
      }
      this.#announced = found;
    }
    return this.#announced;
  }

  /** gobgpd restarted: its RIB is empty. */
  forget(): void {
    this.#announced = undefined;
  }

  async reconcile(wanted: ReadonlySet<string>, podCidrs: ReadonlySet<string>, nextHops: Partial<Record<Family, string>>): Promise<void> {
    const failures = new SyncFailures();
    const announced = new Set<string>();
    for (const family of FAMILIES) {
      const paths = await failures.attempt(`vips/${family}`, () => this.gobgp().listGlobalPaths(AFI_OF[family]));
      if (!paths) {
        // Unknown state: keep what was believed announced, so the export policy keeps letting it through.
        for (const prefix of this.#announced ?? []) if (familyOf(prefix.split('/')[0]!) === family) announced.add(prefix);
        continue;
      }
      const current = new Map<string, ApiPath>();
      for (const path of paths) {
        if (isUnicast(path, AFI_OF[family]) && isVipPath(path, podCidrs)) current.set(pathPrefix(path)!, path);
      }
      const hop = nextHops[family];
      const additions: [string, ApiPath][] = [];
      for (const prefix of wanted) {
        if (familyOf(prefix.split('/')[0]!) !== family) continue;
        const path = current.get(prefix);
        // A failed replacement leaves the old path (with its old next hop) announced.
        if (path) announced.add(prefix);
        if (path && pathNextHop(path) === hop) continue;
        if (!hop) failures.add(`vip/${prefix}/advertise`, new Error(`cannot advertise ${prefix}: the node has no ${family} address for its next hop`));
        else additions.push([prefix, podCidrPath(prefix, hop)]);
      }
      const withdrawals = [...current].filter(([prefix]) => !wanted.has(prefix)).map(([prefix, path]): [string, ApiPath] => [prefix, { ...path, isWithdraw: true }]);
      await this.#apply(additions, 'advertised', (path) => this.gobgp().addPath(path), failures, announced);
      for (const [prefix] of withdrawals) announced.add(prefix);
      await this.#apply(withdrawals, 'withdrawn', (path) => this.gobgp().deletePath(path), failures, announced);
    }
    this.#announced = announced;
    failures.throwIfAny('vip-advertisement');
  }

  /**
   * Many changes go to gobgpd in one bulk call (a thousand Services at once); when it fails, or for a single change,
   * each is made on its own, so that a failure names its VIP and the others still happen.
   */
  async #apply(
    changes: readonly [string, ApiPath][],
    change: VipChange['change'],
    one: (path: ApiPath) => Promise<unknown>,
    failures: SyncFailures,
    announced: Set<string>,
  ): Promise<void> {
    const done = (prefix: string) => {
      if (change === 'advertised') announced.add(prefix);
      else announced.delete(prefix);
      this.onChange({ prefix, change });
    };
    if (changes.length > 1) {
      const bulk = await this.gobgp().addPathsInBulk(changes.map(([, path]) => path)).then(
        () => true,
        () => false,
      );
      if (bulk) {
        for (const [prefix] of changes) done(prefix);
        return;
      }
    }
    const verb = change === 'advertised' ? 'advertise' : 'withdraw';
    for (const [prefix, path] of changes) {
      await failures.attempt(`vip/${prefix}/${verb}`, async () => {
        await one(path);
        done(prefix);
      });
    }
  }
}
