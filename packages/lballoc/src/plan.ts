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
 * What allocation reads of one Service, read once and defensively: a Service comes from the API server as it is
 * stored, and one of the wrong shape (`ingress: [null]`, `externalIPs: 5`, a number as loadBalancerIP) must fail
 * alone instead of stopping the walk for every Service. The addresses it does hold are still held.
 */
interface ServiceView<S extends ServiceLike> {
  readonly service: S;
  readonly key: string;
  readonly ingress: string[];
  readonly externalIPs: string[];
  readonly requested: { valid: string[]; invalid: string[] };
  /** Fields that could not be read; a Service of ours with any is not allocated to. */
  readonly unreadable: string[];
}

function viewOf<S extends ServiceLike>(service: S): ServiceView<S> {
  const unreadable: string[] = [];
  const read = <T>(field: string, fallback: T, reader: () => { values: T; problems: string[] }): T => {
    try {
      const { values, problems } = reader();
      unreadable.push(...problems.map((problem) => `${field}: ${problem}`));
      return values;
    } catch (error) {
      unreadable.push(`${field}: ${error instanceof Error ? error.message : String(error)}`);
      return fallback;
    }
  };
  return {
    service,
    key: read('metadata', '/', () => ({ values: keyOf(service), problems: [] })),
    ingress: read('status.loadBalancer.ingress', [], () => readIngress(service)),
    externalIPs: read('spec.externalIPs', [], () => readExternalIPs(service)),
    requested: read('requested addresses', { valid: [], invalid: [] }, () => ({ values: requestedIPs(service), problems: [] })),
    unreadable,
  };
}

/**
 * Decides, for every Service, what its load balancer ingress should become. Addresses already in use anywhere
 * (another Service's ingress or external IPs, or a requested address) are never handed out again; Services are served
 * oldest first so that a contested requested address goes to the Service that asked first, whatever the list order.
 * Never throws: a Service that cannot be read gets a `fail` decision of its own.
 */
export function planAllocations<S extends ServiceLike>(
  services: readonly S[],
  pool: AddressPool,
  options: PlanOptions,
): PlannedService<S>[] {
  const ordered = services
    .filter((svc) => typeof svc === 'object' && svc !== null)
    .map((svc) => ({ svc, age: safely(() => creationTime(svc), 0), name: safely(() => keyOf(svc), '/') }))
    .sort((a, b) => a.age - b.age || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map(({ svc }) => viewOf(svc));
  const ours = new Map(ordered.map((view) => [view, safely(() => isOurs(view.service, options), false)]));
  // Who holds or has asked for each address: the first holder wins.
  const holders = new Map<string, string>();
  const hold = (address: string, key: string) => {
    if (!holders.has(address)) holders.set(address, key);
  };
  for (const view of ordered) {
    for (const ip of [...view.ingress, ...view.externalIPs]) {
      const c = canonical(ip);
      if (c) hold(c, view.key);
    }
  }
  for (const view of ordered) {
    if (ours.get(view)) for (const ip of view.requested.valid) hold(ip, view.key);
  }

  const walk: Walk = { pool, holders, exhausted: new Set() };
  return ordered.map((view) => {
    let decision: Decision;
    try {
      if (ours.get(view) && view.unreadable.length > 0) {
        decision = { action: 'fail', reason: `the Service cannot be read: ${view.unreadable.join('; ')}` };
      } else decision = ours.get(view) ? decide(view, walk) : release(view, pool);
    } catch (error) {
      decision = { action: 'fail', reason: error instanceof Error ? error.message : String(error) };
    }
    return { service: view.service, key: view.key, decision };
  });
}

/** The state one walk shares between its Services. */
interface Walk {
  readonly pool: AddressPool;
  readonly holders: Map<string, string>;
  /**
   * Families found exhausted in this walk. Scanning a full pool costs its size; remembering the answer makes every
   * further waiting Service cost nothing, until the walk frees an address of the family again.
   */
  readonly exhausted: Set<Family>;
}

function decide(view: ServiceView<ServiceLike>, walk: Walk): Decision {
  const { service: svc, key } = view;
  const { pool, holders } = walk;
  const families = wantedFamilies(svc);
  const requireDual = svc.spec?.ipFamilyPolicy === 'RequireDualStack';
  // Only PreferDualStack takes what it can get; every other policy needs each family it asks for.
  const preferOnly = svc.spec?.ipFamilyPolicy === 'PreferDualStack';
  const current = view.ingress;
  const holderOf = (ip: string) => holders.get(canonical(ip) ?? ip);
  // An address of ours that an older Service also holds (a manual edit, a restore) is taken from this one, whatever
  // this one requests, whichever family it is of, and even when nothing else can be done for it: two Services never
  // keep one address.
  const contested = current.filter((ip) => isContested(ip, pool, holderOf, key));
  const repairs = contested.map((ip) => `address ${ip} is also held by ${holderOf(ip)}`);
  const failed = (problems: string[]): Decision =>
    repairs.length > 0
      ? { action: 'assign', ingress: current.filter((ip) => !contested.includes(ip)), added: [], problems, repairs }
      : { action: 'fail', reason: problems.join('; ') };

  if (requireDual) {
    const missing = (['IPv4', 'IPv6'] as const).filter((f) => !pool.has(f));
    if (missing.length > 0) return failed([`RequireDualStack but no ${missing.join(' or ')} range is configured`]);
  }
  const requested = view.requested;
  const invalid = [...requested.invalid.map((a) => `invalid requested address ${JSON.stringify(a)}`)];
  for (const family of ['IPv4', 'IPv6'] as const) {
    const ofFamily = requested.valid.filter((ip) => familyOf(ip) === family);
    if (ofFamily.length > 1) invalid.push(`more than one requested ${family} address (${ofFamily.join(', ')})`);
    if (ofFamily.length > 0 && !families.includes(family)) {
      invalid.push(`requested address ${ofFamily.join(', ')} is ${family}, but the Service's ipFamilies are ${families.join(', ')}`);
    }
  }
  if (invalid.length > 0) return failed(invalid);

  const next = current.filter((ip) => !contested.includes(ip));
  const added: string[] = [];
  const problems: string[] = [];
  const drop = (ip: string) => next.splice(next.indexOf(ip), 1);
  for (const family of families) {
    const kept = current.filter((ip) => familyOf(ip) === family && !contested.includes(ip));
    const want = requested.valid.find((ip) => familyOf(ip) === family);
    if (want !== undefined) {
      if (kept.some((ip) => canonical(ip) === want)) continue;
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
      for (const old of kept.filter((ip) => pool.contains(ip))) drop(old);
      holders.set(want, key);
      next.push(want);
      added.push(want);
      continue;
    }
    if (kept.length > 0) continue;
    if (!pool.has(family)) {
      if (!preferOnly) problems.push(`no ${family} range is configured`);
      continue;
    }
    const address = walk.exhausted.has(family) ? undefined : pool.allocate(family, (candidate) => holders.has(candidate));
    if (address === undefined) {
      walk.exhausted.add(family);
      problems.push(`the ${family} pool is exhausted (${pool.size(family)} addresses in use)`);
      continue;
    }
    holders.set(address, key);
    next.push(address);
    added.push(address);
  }

  const served = families.filter((f) => next.some((ip) => familyOf(ip) === f));
  if (problems.length > 0 && (requireDual || served.length === 0)) {
    // Nothing is added: a dual-stack Service never gets half of what it requires. A dynamic address handed back is
    // free for the Services after this one; a requested one stays reserved for its Service.
    for (const ip of added) {
      if (requested.valid.includes(ip)) continue;
      holders.delete(ip);
      walk.exhausted.delete(familyOf(ip) as Family);
    }
    return failed(problems);
  }
  if (added.length === 0 && repairs.length === 0) {
    return problems.length > 0 ? { action: 'fail', reason: problems.join('; ') } : { action: 'keep' };
  }
  return { action: 'assign', ingress: next, added, problems, repairs };
}

function isContested(ip: string, pool: AddressPool, holderOf: (ip: string) => string | undefined, key: string): boolean {
  return pool.contains(ip) && holderOf(ip) !== key;
}

function release(view: ServiceView<ServiceLike>, pool: AddressPool): Decision {
  if (view.service.spec?.type === 'LoadBalancer') return { action: 'keep' };
  const current = view.ingress;
  const released = current.filter((ip) => pool.contains(ip));
  if (released.length === 0) return { action: 'keep' };
  return { action: 'release', ingress: current.filter((ip) => !released.includes(ip)), released };
}

/** The families a Service wants: spec.ipFamilies as the API server defaults it, else derived from its policy. */
export function wantedFamilies(svc: ServiceLike): Family[] {
  const ipFamilies: unknown = svc.spec?.ipFamilies;
  const declared = (Array.isArray(ipFamilies) ? ipFamilies : []).filter((f): f is Family => f === 'IPv4' || f === 'IPv6');
  if (declared.length > 0) return [...new Set(declared)];
  const policy = svc.spec?.ipFamilyPolicy;
  if (policy === 'RequireDualStack' || policy === 'PreferDualStack') return ['IPv4', 'IPv6'];
  const clusterIPs: unknown = svc.spec?.clusterIPs;
  const first: unknown = Array.isArray(clusterIPs) ? clusterIPs[0] : undefined;
  return [(typeof first === 'string' && familyOf(first)) || 'IPv4'];
}

/** The ingress addresses of a Service's status (entries of the wrong shape are left out). */
export function ingressIPs(svc: ServiceLike): string[] {
  return readIngress(svc).values;
}

/**
 * The addresses a field lists, and what is wrong with the entries that are not addresses. What can be read of a bad
 * list still counts: those addresses must not be handed out to another Service.
 */
function readIngress(svc: ServiceLike): { values: string[]; problems: string[] } {
  const ingress: unknown = svc.status?.loadBalancer?.ingress;
  if (ingress === undefined || ingress === null) return { values: [], problems: [] };
  if (!Array.isArray(ingress)) return { values: [], problems: [`expected a list, got ${describe(ingress)}`] };
  const values: string[] = [];
  const problems: string[] = [];
  ingress.forEach((entry: unknown, index) => {
    if (typeof entry !== 'object' || entry === null) {
      problems.push(`entry ${index} is ${describe(entry)}, expected an object`);
      return;
    }
    const ip: unknown = (entry as { ip?: unknown }).ip;
    if (typeof ip === 'string' && ip !== '') values.push(ip);
    else if (ip !== undefined && ip !== null && ip !== '') problems.push(`entry ${index} has ip ${describe(ip)}, expected a string`);
  });
  return { values, problems };
}

function readExternalIPs(svc: ServiceLike): { values: string[]; problems: string[] } {
  const externalIPs: unknown = svc.spec?.externalIPs;
  if (externalIPs === undefined || externalIPs === null) return { values: [], problems: [] };
  if (!Array.isArray(externalIPs)) return { values: [], problems: [`expected a list of addresses, got ${describe(externalIPs)}`] };
  const values: string[] = [];
  const problems: string[] = [];
  externalIPs.forEach((ip: unknown, index) => {
    if (typeof ip === 'string') values.push(ip);
    else problems.push(`entry ${index} is ${describe(ip)}, expected a string`);
  });
  return { values, problems };
}

/** Addresses asked for through spec.loadBalancerIP or our annotation, in canonical form. */
export function requestedIPs(svc: ServiceLike): { valid: string[]; invalid: string[] } {
  const annotations: unknown = svc.metadata?.annotations;
  const annotation: unknown =
    typeof annotations === 'object' && annotations !== null
      ? (annotations as Record<string, unknown>)[REQUESTED_IPS_ANNOTATION]
      : undefined;
  const loadBalancerIP: unknown = svc.spec?.loadBalancerIP;
  if (annotation !== undefined && annotation !== null && typeof annotation !== 'string') {
    throw new TypeError(`annotation ${REQUESTED_IPS_ANNOTATION} is ${describe(annotation)}, expected a string`);
  }
  if (loadBalancerIP !== undefined && loadBalancerIP !== null && typeof loadBalancerIP !== 'string') {
    throw new TypeError(`spec.loadBalancerIP is ${describe(loadBalancerIP)}, expected a string`);
  }
  const raw = [...(annotation ?? '').split(','), loadBalancerIP ?? '']
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

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${String(value)}`;
}

function safely<T>(read: () => T, fallback: T): T {
  try {
    return read();
  } catch {
    return fallback;
  }
}

function creationTime(svc: ServiceLike): number {
  const value: unknown = svc.metadata?.creationTimestamp;
  if (value === undefined) return 0;
  const t = value instanceof Date ? value.getTime() : typeof value === 'string' ? Date.parse(value) : Number.NaN;
  return Number.isNaN(t) ? 0 : t;
}
