import type { V1Node } from '@kubernetes/client-node';
import type { DefinedSet, PolicyAssignment, PolicyDirection, PolicyStatement, RouteAction, RoutingPolicy } from './gobgp-api.js';
import { parseCidr } from '@kube-router/kube';
import { familyOf, type Family } from './nodes.js';
import { parseGoUint, splitList } from './parse.js';

/** kube-router's Node annotations for its BGP policies. */
export const NODE_COMMUNITIES_ANNOTATION = 'kube-router.io/node.bgp.communities';
export const NODE_CUSTOM_IMPORT_REJECT_ANNOTATION = 'kube-router.io/node.bgp.customimportreject';
export const PATH_PREPEND_AS_ANNOTATION = 'kube-router.io/path-prepend.as';
export const PATH_PREPEND_REPEAT_ANNOTATION = 'kube-router.io/path-prepend.repeat-n';

/** The policies' names in gobgpd, assigned to its global RIB. */
export const IMPORT_POLICY = 'kube_router_import';
export const EXPORT_POLICY = 'kube_router_export';

// kube-router's defined set names, one per family: a gobgp prefix set cannot mix families.
const SETS = {
  podCidrs: { ipv4: 'podcidrdefinedset', ipv6: 'podcidrdefinedsetv6' },
  serviceVips: { ipv4: 'servicevipsdefinedset', ipv6: 'servicevipsdefinedsetv6' },
  defaultRoute: { ipv4: 'defaultroutedefinedset', ipv6: 'defaultroutedefinedsetv6' },
  customImportReject: { ipv4: 'customimportrejectdefinedset', ipv6: 'customimportrejectdefinedsetv6' },
  allPeers: { ipv4: 'allpeerset', ipv6: 'allpeersetv6' },
  externalPeers: { ipv4: 'externalpeerset', ipv6: 'externalpeersetv6' },
  internalPeers: { ipv4: 'iBGPpeerset', ipv6: 'iBGPpeersetv6' },
} as const satisfies Record<string, Record<Family, string>>;

const FAMILIES: readonly Family[] = ['ipv4', 'ipv6'];
const HOST_LENGTH: Record<Family, number> = { ipv4: 32, ipv6: 128 };
const DEFAULT_ROUTE: Record<Family, string> = { ipv4: '0.0.0.0/0', ipv6: '::/0' };

// gobgp's well-known community names (packet/bgp WellKnownCommunityNameMap), which its policy accepts by name.
const WELL_KNOWN_COMMUNITIES = new Set([
  'internet',
  'planned-shut',
  'accept-own',
  'route-filter-translated-v4',
  'route-filter-v4',
  'route-filter-translated-v6',
  'route-filter-v6',
  'llgr-stale',
  'no-llgr',
  'blackhole',
  'no-export',
  'no-advertise',
  'no-export-subconfed',
  'no-peer',
]);

/** What this node's annotations ask of its policies; anything invalid is left out and reported. */
export interface NodePolicySettings {
  /** Added to every path sent to an external peer. */
  communities: string[];
  /** Prepended to the AS path of every path sent to an external peer. */
  prepend?: { asn: number; repeat: number };
  /** Canonical CIDRs: a path from a peer for one of them, or for a longer prefix inside one, is not imported. */
  customImportReject: string[];
}

export interface AnnotationProblem {
  annotation: string;
  message: string;
}

/**
 * The policy settings of kube-router's Node annotations. kube-router drops an invalid community and keeps the rest;
 * here an invalid prepend or reject CIDR is dropped the same way (kube-router ignores the whole annotation), so one
 * typo never takes away what the other entries ask for. Every problem is returned for a Warning event.
 */
export function nodePolicySettings(node: V1Node): { settings: NodePolicySettings; problems: AnnotationProblem[] } {
  const annotations = node.metadata?.annotations ?? {};
  const problems: AnnotationProblem[] = [];
  const settings: NodePolicySettings = { communities: [], customImportReject: [] };

  for (const community of splitList(annotations[NODE_COMMUNITIES_ANNOTATION])) {
    if (isCommunity(community)) settings.communities.push(community);
    else {
      problems.push({
        annotation: NODE_COMMUNITIES_ANNOTATION,
        message: `${JSON.stringify(community)} is not a community (a number, aa:nn, or a well-known name such as no-export)`,
      });
    }
  }

  const prependAs = annotations[PATH_PREPEND_AS_ANNOTATION];
  const prependRepeat = annotations[PATH_PREPEND_REPEAT_ANNOTATION];
  if (prependAs !== undefined || prependRepeat !== undefined) {
    const asn = parseUnsigned(prependAs, 32);
    const repeat = parseUnsigned(prependRepeat, 8);
    if (prependAs === undefined || prependRepeat === undefined) {
      problems.push({
        annotation: prependAs === undefined ? PATH_PREPEND_AS_ANNOTATION : PATH_PREPEND_REPEAT_ANNOTATION,
        message: `${PATH_PREPEND_AS_ANNOTATION} and ${PATH_PREPEND_REPEAT_ANNOTATION} must be set together; no AS path prepend`,
      });
    } else if (asn === undefined || asn === 0) {
      problems.push({ annotation: PATH_PREPEND_AS_ANNOTATION, message: `${JSON.stringify(prependAs)} is not an ASN (1-4294967295); no AS path prepend` });
    } else if (repeat === undefined) {
      problems.push({ annotation: PATH_PREPEND_REPEAT_ANNOTATION, message: `${JSON.stringify(prependRepeat)} is not a repeat count (0-255); no AS path prepend` });
    } else if (repeat > 0) {
      settings.prepend = { asn, repeat };
    }
  }

  for (const cidr of splitList(annotations[NODE_CUSTOM_IMPORT_REJECT_ANNOTATION])) {
    // Read as net.ParseCIDR reads it (kube-router takes 10.1.2.3/16 as 10.1.0.0/16); ipaddr.js took 010.0.0.0/8 for 8.0.0.0/8.
    const parsed = parseCidr(cidr);
    if (parsed === undefined) {
      problems.push({ annotation: NODE_CUSTOM_IMPORT_REJECT_ANNOTATION, message: `${JSON.stringify(cidr)} is not a CIDR; it is not rejected` });
    } else {
      settings.customImportReject.push(parsed.cidr);
    }
  }
  return { settings, problems };
}

/** kube-router reads both with strconv.ParseUint(value, 0, bits). */
function parseUnsigned(value: string | undefined, bits: 8 | 32): number | undefined {
  return value === undefined ? undefined : parseGoUint(value.trim(), bits);
}

/** As gobgp's ParseCommunity (and kube-router's ValidateCommunity): a 32-bit number, aa:nn of 16 bits each, or a name. */
export function isCommunity(value: string): boolean {
  if (/^\d+$/.test(value)) return Number(value) <= 4_294_967_295;
  const parts = /^(\d+):(\d+)$/.exec(value);
  if (parts) return Number(parts[1]) <= 65_535 && Number(parts[2]) <= 65_535;
  return WELL_KNOWN_COMMUNITIES.has(value);
}

export interface PolicyInput {
  /** This node's pod CIDRs. */
  podCidrs: readonly string[];
  /** The host prefixes of the Service VIPs this node announces (and those it is withdrawing). */
  vips: Iterable<string>;
  /** The peers of the iBGP mesh (other Nodes). */
  internalPeers: Iterable<string>;
  /** Every other peer: external routers. */
  externalPeers: Iterable<string>;
  /** --enable-ibgp: pod CIDRs go to the iBGP peers. */
  enableIbgp: boolean;
  /** --advertise-pod-cidr: pod CIDRs go to the external peers too. */
  advertisePodCidr: boolean;
  /** --override-nexthop: paths sent to external peers carry this node's address of the session as next hop. */
  overrideNextHop: boolean;
  node: NodePolicySettings;
}

/**
 * kube-router's import and export policies (bgp_policies.go) for this node.
 *
 * Export, default reject: pod CIDRs to iBGP peers; Service VIPs, and with --advertise-pod-cidr the pod CIDRs, to
 * external peers, with the node's communities, AS path prepend and --override-nexthop. Nothing else: paths learned
 * from one peer are never passed on to another, and VIPs never go to the mesh, whose nodes announce their own.
 *
 * Import, default accept: from any peer, no Service VIP (every node originates its own), no default route, nothing
 * inside the node's kube-router.io/node.bgp.customimportreject CIDRs.
 *
 * A statement never refers to an empty set: gobgp's ANY match over an empty set would match every path.
 */
export function buildRoutingPolicy(input: PolicyInput): RoutingPolicy {
  const definedSets: DefinedSet[] = [];
  const nonEmpty = new Set<string>();
  const prefixSet = (name: string, prefixes: { ipPrefix: string; maskLengthMin: number; maskLengthMax: number }[]) => {
    definedSets.push({ definedType: 'PREFIX', name, prefixes });
    if (prefixes.length > 0) nonEmpty.add(name);
  };
  const neighborSet = (name: string, list: string[]) => {
    definedSets.push({ definedType: 'NEIGHBOR', name, list });
    if (list.length > 0) nonEmpty.add(name);
  };
  const byFamily = <T extends string>(items: Iterable<T>, family: Family) =>
    [...new Set(items)].filter((item) => familyOf(item.split('/')[0]!) === family).sort();
  const exact = (cidr: string) => {
    const length = Number(cidr.split('/')[1]);
    return { ipPrefix: cidr, maskLengthMin: length, maskLengthMax: length };
  };

  const internal = [...input.internalPeers];
  const external = [...input.externalPeers].filter((peer) => !internal.includes(peer));
  for (const family of FAMILIES) {
    const host = (address: string) => `${address}/${HOST_LENGTH[family]}`;
    prefixSet(SETS.podCidrs[family], byFamily(input.podCidrs, family).map(exact));
    prefixSet(SETS.serviceVips[family], byFamily(input.vips, family).map(exact));
    prefixSet(SETS.defaultRoute[family], [exact(DEFAULT_ROUTE[family])]);
    prefixSet(
      SETS.customImportReject[family],
      byFamily(input.node.customImportReject, family).map((cidr) => ({ ...exact(cidr), maskLengthMax: HOST_LENGTH[family] })),
    );
    neighborSet(SETS.internalPeers[family], byFamily(internal, family).map(host));
    neighborSet(SETS.externalPeers[family], byFamily(external, family).map(host));
    neighborSet(SETS.allPeers[family], byFamily([...internal, ...external], family).map(host));
  }

  // Cross products over both families: an IPv6 prefix can travel over an IPv4 session and the other way round.
  const statements = (prefixSets: readonly string[], neighborSets: readonly string[], actions: PolicyStatement['actions']) =>
    prefixSets.flatMap((prefixes) =>
      neighborSets
        .filter((neighbors) => nonEmpty.has(prefixes) && nonEmpty.has(neighbors))
        .map((neighbors): PolicyStatement => ({
          name: `${prefixes}${neighbors}`,
          conditions: { prefixSet: { type: 'ANY', name: prefixes }, neighborSet: { type: 'ANY', name: neighbors } },
          actions,
        })),
    );
  const both = (sets: Record<Family, string>) => FAMILIES.map((family) => sets[family]);

  const toExternal: PolicyStatement['actions'] = {
    routeAction: 'ACCEPT',
    ...(input.node.communities.length > 0 && { community: { type: 'ADD', communities: [...input.node.communities] } }),
    ...(input.node.prepend && { asPrepend: { asn: input.node.prepend.asn, repeat: input.node.prepend.repeat } }),
    ...(input.overrideNextHop && { nexthop: { self: true } }),
  };
  const exportStatements = [
    ...(input.enableIbgp ? statements(both(SETS.podCidrs), both(SETS.internalPeers), { routeAction: 'ACCEPT' }) : []),
    ...statements(both(SETS.serviceVips), both(SETS.externalPeers), toExternal),
    ...(input.advertisePodCidr ? statements(both(SETS.podCidrs), both(SETS.externalPeers), toExternal) : []),
  ];
  const reject: PolicyStatement['actions'] = { routeAction: 'REJECT' };
  const importStatements = [
    ...statements(both(SETS.serviceVips), both(SETS.allPeers), reject),
    ...statements(both(SETS.defaultRoute), both(SETS.allPeers), reject),
    ...statements(both(SETS.customImportReject), both(SETS.allPeers), reject),
  ];
  return {
    definedSets,
    policies: [
      { name: IMPORT_POLICY, statements: importStatements },
      { name: EXPORT_POLICY, statements: exportStatements },
    ],
  };
}

export interface PolicyGobgp {
  setPolicies(policy: RoutingPolicy): Promise<unknown>;
  getGlobalPolicyAssignment(direction: PolicyDirection): Promise<PolicyAssignment | undefined>;
  setGlobalPolicyAssignment(direction: PolicyDirection, policyNames: readonly string[], defaultAction: RouteAction): Promise<unknown>;
  softResetAllPeers(direction: 'IN' | 'OUT' | 'BOTH'): Promise<unknown>;
}

const ASSIGNMENTS: readonly { direction: PolicyDirection; policy: string; defaultAction: RouteAction }[] = [
  { direction: 'IMPORT', policy: IMPORT_POLICY, defaultAction: 'ACCEPT' },
  { direction: 'EXPORT', policy: EXPORT_POLICY, defaultAction: 'REJECT' },
];

/**
 * Keeps gobgpd's routing policy equal to the wanted one. The whole policy is replaced in one SetPolicies call (gobgpd
 * swaps it atomically; no moment where a half-updated set matches too much), and only when it changed or gobgpd lost
 * its assignment (a restarted gobgpd has none). gobgpd applies a new policy only to paths that change afterwards, so
 * a change is followed by a soft reset of every session: out re-sends what the export policy now allows, in
 * re-evaluates what peers sent against the import policy.
 */
export class PolicyReconciler {
  /** What gobgpd was last given, split into the VIP sets and everything else; undefined after a failed apply. */
  #applied: { vips: string; rest: string } | undefined;

  constructor(private readonly gobgp: () => PolicyGobgp) {}

  /** Whether a policy was applied to this gobgpd and not forgotten since. */
  get applied(): boolean {
    return this.#applied !== undefined;
  }

  /** gobgpd restarted: it has no policy. */
  forget(): void {
    this.#applied = undefined;
  }

  /**
   * Whether the policy was (re)applied. `undefined` wants no policy at all (gobgpd's defaults: accept everything), as
   * kube-router leaves a route reflector server, whose job is to pass on what it learns.
   */
  async reconcile(policy: RoutingPolicy | undefined): Promise<boolean> {
    const wanted = policy ?? { definedSets: [], policies: [] };
    const assignments = ASSIGNMENTS.map((a) => (policy ? a : { ...a, policy: undefined, defaultAction: 'ACCEPT' as const }));
    const vipSets = new Set<string>(Object.values(SETS.serviceVips));
    const fingerprint = {
      vips: JSON.stringify(wanted.definedSets.filter((set) => vipSets.has(set.name))),
      rest: JSON.stringify({ ...wanted, definedSets: wanted.definedSets.filter((set) => !vipSets.has(set.name)) }),
    };
    const assigned = await Promise.all(
      assignments.map(async ({ direction, policy: name, defaultAction }) => {
        const current = await this.gobgp().getGlobalPolicyAssignment(direction);
        const names = (current?.policies ?? []).map((p) => p.name);
        // gobgpd reports no assignment at all for a direction it has never been given one.
        if (!current) return !name;
        return current.defaultAction === defaultAction && names.join() === (name ?? '');
      }),
    );
    const previous = this.#applied;
    const intact = assigned.every(Boolean);
    if (intact && previous?.vips === fingerprint.vips && previous.rest === fingerprint.rest) return false;
    this.#applied = undefined;
    await this.gobgp().setPolicies(wanted);
    for (const { direction, policy: name, defaultAction } of assignments) {
      await this.gobgp().setGlobalPolicyAssignment(direction, name ? [name] : [], defaultAction);
    }
    // Only the VIPs changed (a Service came or went): exports need no reset, since a new VIP is added after its set
    // grew and a withdrawn one leaves the set only after it was withdrawn; the import side re-evaluates locally. Not
    // re-sending every path to every peer matters when a thousand Services come one by one.
    const vipsOnly = intact && previous?.rest === fingerprint.rest;
    await this.gobgp().softResetAllPeers(vipsOnly ? 'IN' : 'BOTH');
    this.#applied = fingerprint;
    return true;
  }
}
