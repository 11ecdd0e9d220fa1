import { canonical, familyOf, type AddressPool, type Family } from './pool.js';

/** The fields of a core/v1 Service that allocation reads. */
export interface ServiceLike {
  metadata?: {
    namespace?: string;
    name?: string;
    annotations?: Record<string, string>;
    creationTimestamp?: Date | string;
  };
  spec?: {
    type?: string;
    loadBalancerClass?: string;
    loadBalancerIP?: string;
    externalIPs?: string[];
    ipFamilies?: string[];
    ipFamilyPolicy?: string;
    clusterIPs?: string[];
  };
  status?: { loadBalancer?: { ingress?: Array<{ ip?: string; hostname?: string }> } };
}

/** Our own annotation for requesting addresses: one per family, comma-separated. */
export const REQUESTED_IPS_ANNOTATION = 'kube-router.io/loadbalancer-ips';
export const LOADBALANCER_CLASS = 'kube-router';

export type Decision =
  /** Nothing to do: not ours, or already served. */
  | { action: 'keep' }
  /**
   * Write this ingress list to the Service's status. `problems` are what could not be served (a PreferDualStack
   * Service whose second family is exhausted): the write goes ahead and the sync still reports them. `repairs` say
   * which duplicate addresses were taken away from this Service.
   */
  | { action: 'assign'; ingress: string[]; added: string[]; problems: string[]; repairs: string[] }
  /** The Service left type LoadBalancer: drop our addresses from its status so that they return to the pool. */
  | { action: 'release'; ingress: string[]; released: string[] }
  | { action: 'fail'; reason: string };

export interface PlanOptions {
  /** --loadbalancer-default-class: also serve Services of no class or class `default`. */
  defaultClass: boolean;
}

export interface PlannedService<S extends ServiceLike> {
  service: S;
  key: string;
  decision: Decision;
}

export const keyOf = (svc: ServiceLike) => `${svc.metadata?.namespace ?? ''}/${svc.metadata?.name ?? ''}`;

export function isOurs(svc: ServiceLike, options: PlanOptions): boolean {
  if (svc.spec?.type !== 'LoadBalancer') return false;
  const cls = svc.spec.loadBalancerClass ?? '';
  return cls === LOADBALANCER_CLASS || (options.defaultClass && (cls === '' || cls === 'default'));
}

/**
 * Decides, for every Service, what its load balancer ingress should become. Addresses already in use anywhere
 * (another Service's ingress or external IPs, or a requested address) are never handed out again; Services are served
 * oldest first so that a contested requested address goes to the Service that asked first, whatever the list order.
 */
export function planAllocations<S extends ServiceLike>(
  services: readonly S[],
  pool: AddressPool,
  options: PlanOptions,
): PlannedService<S>[] {
  const ordered = [...services].sort(byAge);
  // Who holds or has asked for each address: the first holder wins.
  const holders = new Map<string, string>();
  const hold = (address: string, key: string) => {
    if (!holders.has(address)) holders.set(address, key);
  };
  for (const svc of ordered) {
    for (const ip of [...ingressIPs(svc), ...(svc.spec?.externalIPs ?? [])]) {
      const c = canonical(ip);
      if (c) hold(c, keyOf(svc));
    }
  }
  for (const svc of ordered) {
    if (!isOurs(svc, options)) continue;
    for (const ip of requestedIPs(svc).valid) hold(ip, keyOf(svc));
  }

  return ordered.map((service) => {
    const key = keyOf(service);
    let decision: Decision;
    try {
      decision = isOurs(service, options) ? decide(service, key, pool, holders) : release(service, pool);
    } catch (error) {
      decision = { action: 'fail', reason: error instanceof Error ? error.message : String(error) };
    }
    return { service, key, decision };
  });
}

function decide(svc: ServiceLike, key: string, pool: AddressPool, holders: Map<string, string>): Decision {
  const families = wantedFamilies(svc);
  const requireDual = svc.spec?.ipFamilyPolicy === 'RequireDualStack';
  // Only PreferDualStack takes what it can get; every other policy needs each family it asks for.
  const preferOnly = svc.spec?.ipFamilyPolicy === 'PreferDualStack';
  if (requireDual) {
    const missing = (['IPv4', 'IPv6'] as const).filter((f) => !pool.has(f));
    if (missing.length > 0) return { action: 'fail', reason: `RequireDualStack but no ${missing.join(' or ')} range is configured` };
  }
  const requested = requestedIPs(svc);
  const invalid = [...requested.invalid.map((a) => `invalid requested address ${JSON.stringify(a)}`)];
  for (const family of ['IPv4', 'IPv6'] as const) {
    const ofFamily = requested.valid.filter((ip) => familyOf(ip) === family);
    if (ofFamily.length > 1) invalid.push(`more than one requested ${family} address (${ofFamily.join(', ')})`);
    if (ofFamily.length > 0 && !families.includes(family)) {
      invalid.push(`requested address ${ofFamily.join(', ')} is ${family}, but the Service's ipFamilies are ${families.join(', ')}`);
    }
  }
  if (invalid.length > 0) return { action: 'fail', reason: invalid.join('; ') };

  const current = ingressIPs(svc);
  const next = [...current];
  const added: string[] = [];
  const problems: string[] = [];
  const repairs: string[] = [];
  const drop = (ip: string) => next.splice(next.indexOf(ip), 1);
  for (const family of families) {
    const want = requested.valid.find((ip) => familyOf(ip) === family);
    const have = current.filter((ip) => familyOf(ip) === family);
    if (want !== undefined) {
      if (have.some((ip) => canonical(ip) === want)) continue;
      if (!pool.contains(want)) {
        problems.push(`requested address ${want} is not in any --loadbalancer-ip-range`);
        continue;
      }
      const holder = holders.get(want);
      if (holder !== undefined && holder !== key) {
        problems.push(`requested address ${want} is in use by ${holder}`);
        continue;
      }
      // The requested address replaces the family's addresses that we handed out before.
      for (const old of have.filter((ip) => pool.contains(ip))) drop(old);
      holders.set(want, key);
      next.push(want);
      added.push(want);
      continue;
    }
    // An address of ours that an older Service also holds (a manual edit, a restore) is taken from this one.
    const contested = have.filter((ip) => pool.contains(ip) && holders.get(canonical(ip) ?? ip) !== key);
    for (const ip of contested) {
      drop(ip);
      repairs.push(`address ${ip} is also held by ${holders.get(canonical(ip) ?? ip)}`);
    }
    if (have.length > contested.length) continue;
    if (!pool.has(family)) {
      if (!preferOnly) problems.push(`no ${family} range is configured`);
      continue;
    }
    const address = pool.allocate(family, (candidate) => holders.has(candidate));
    if (address === undefined) {
      problems.push(`the ${family} pool is exhausted (${pool.size(family)} addresses in use)`);
      continue;
    }
    holders.set(address, key);
    next.push(address);
    added.push(address);
  }

  const served = families.filter((f) => next.some((ip) => familyOf(ip) === f));
  if (problems.length > 0 && (requireDual || served.length === 0)) {
    // Nothing is written: a dual-stack Service never gets half of what it requires.
    for (const ip of added) holders.delete(ip);
    return { action: 'fail', reason: [...problems, ...repairs].join('; ') };
  }
  if (added.length === 0 && repairs.length === 0) {
    return problems.length > 0 ? { action: 'fail', reason: problems.join('; ') } : { action: 'keep' };
  }
  return { action: 'assign', ingress: next, added, problems, repairs };
}

function release(svc: ServiceLike, pool: AddressPool): Decision {
  if (svc.spec?.type === 'LoadBalancer') return { action: 'keep' };
  const current = ingressIPs(svc);
  const released = current.filter((ip) => pool.contains(ip));
  if (released.length === 0) return { action: 'keep' };
  return { action: 'release', ingress: current.filter((ip) => !released.includes(ip)), released };
}

/** The families a Service wants: spec.ipFamilies as the API server defaults it, else derived from its policy. */
export function wantedFamilies(svc: ServiceLike): Family[] {
  const declared = (svc.spec?.ipFamilies ?? []).filter((f): f is Family => f === 'IPv4' || f === 'IPv6');
  if (declared.length > 0) return [...new Set(declared)];
  const policy = svc.spec?.ipFamilyPolicy;
  if (policy === 'RequireDualStack' || policy === 'PreferDualStack') return ['IPv4', 'IPv6'];
  const fromClusterIP = familyOf(svc.spec?.clusterIPs?.[0] ?? '');
  return [fromClusterIP ?? 'IPv4'];
}

export function ingressIPs(svc: ServiceLike): string[] {
  return (svc.status?.loadBalancer?.ingress ?? []).flatMap((i) => (i.ip ? [i.ip] : []));
}

/** Addresses asked for through spec.loadBalancerIP or our annotation, in canonical form. */
export function requestedIPs(svc: ServiceLike): { valid: string[]; invalid: string[] } {
  const raw = [
    ...(svc.metadata?.annotations?.[REQUESTED_IPS_ANNOTATION] ?? '').split(','),
    svc.spec?.loadBalancerIP ?? '',
  ]
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const valid: string[] = [];
  const invalid: string[] = [];
  for (const text of raw) {
    const c = canonical(text);
    if (c === undefined) invalid.push(text);
    else if (!valid.includes(c)) valid.push(c);
  }
  return { valid, invalid };
}

function byAge(a: ServiceLike, b: ServiceLike): number {
  const ta = time(a.metadata?.creationTimestamp);
  const tb = time(b.metadata?.creationTimestamp);
  if (ta !== tb) return ta - tb;
  return keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0;
}

function time(value: Date | string | undefined): number {
  if (value === undefined) return 0;
  const t = value instanceof Date ? value.getTime() : Date.parse(value);
  return Number.isNaN(t) ? 0 : t;
}
