/*
 * The compiled, backend-neutral policy model. Every list is sorted (strings in code-unit order, rules in spec order),
 * so rendering the same cluster state twice produces identical output.
 */

export type IpFamily = 'ipv4' | 'ipv6';
export const IP_FAMILIES: readonly IpFamily[] = ['ipv4', 'ipv6'];

export interface PerFamily<T> {
  readonly ipv4: T;
  readonly ipv6: T;
}

export type Protocol = 'TCP' | 'UDP' | 'SCTP';
export type Direction = 'ingress' | 'egress';

/** A protocol with a port, a port range (`port`..`endPort`), or every port when `port` is absent. */
export interface PortRange {
  readonly protocol: Protocol;
  readonly port?: number;
  readonly endPort?: number;
}

/** A CIDR (normalised to its network address) minus the CIDRs in `except`, all of one family. */
export interface IpBlock {
  readonly cidr: string;
  readonly except: readonly string[];
}

/**
 * The peers of one rule: the remote side (sources for ingress, destinations for egress). `any` means every address,
 * pod or not; otherwise the peers are the listed pod IPs plus the ipBlocks. An empty family (no pod IPs, no ipBlocks)
 * matches nothing in that family — it is never "any".
 */
export interface RulePeers {
  readonly any: boolean;
  /**
   * What selects `pods`: the canonical keys of the rule's pod and namespace selectors. Rules of any policy with equal
   * keys select the same pods, so a backend may give them one set of addresses that a pod event changes once. Empty
   * when `any`, or when the rule has no selector peers.
   */
  readonly podsKey: string;
  /** Sorted (compareText order) and without duplicates: backends use the lists as they are. */
  readonly pods: PerFamily<readonly string[]>;
  readonly ipBlocks: PerFamily<readonly IpBlock[]>;
}

/**
 * A named port resolved to a number. It allows traffic only to `destinations`: for ingress the policy's local target
 * pods that define the port, for egress the peer pods that define it (each pod may number the name differently, so
 * one name can yield several entries).
 */
export interface NamedPortMatch {
  readonly name: string;
  readonly protocol: Protocol;
  readonly port: number;
  readonly destinations: PerFamily<readonly string[]>;
}

/**
 * One rule of a policy. Traffic matches when the remote side is in `peers` and either `allPorts`, or its protocol and
 * destination port are in `ports`, or it goes to a destination of a `namedPorts` entry on that entry's port. A rule
 * whose ports were all named and resolved to nothing has `allPorts: false` and no ports: it matches nothing.
 */
export interface CompiledRule {
  /** Position in spec.ingress / spec.egress, stable for naming rendered objects. */
  readonly index: number;
  readonly peers: RulePeers;
  readonly allPorts: boolean;
  readonly ports: readonly PortRange[];
  readonly namedPorts: readonly NamedPortMatch[];
}

export interface CompiledDirection {
  /** The policy isolates its targets in this direction (from policyTypes, or their default). */
  readonly isolates: boolean;
  /**
   * The policy could not be compiled for this direction. Renderers must drop all traffic of the policy's targets in
   * this direction (fail closed), whatever other policies allow; `rules` is then empty.
   */
  readonly failClosed: boolean;
  /** Allow rules; the union of all rules of all policies isolating a pod is what it may do. */
  readonly rules: readonly CompiledRule[];
}

export interface PolicyTarget {
  /** `namespace/name` of a local pod the policy selects. */
  readonly pod: string;
  readonly ips: PerFamily<readonly string[]>;
}

export interface CompiledPolicy {
  /** `namespace/name`. */
  readonly id: string;
  readonly namespace: string;
  readonly name: string;
  /** A hash of everything below; equal fingerprints render identically, so renderers can skip unchanged policies. */
  readonly fingerprint: string;
  /** The local pods the policy selects (never empty: policies without local targets are not in the model). */
  readonly targets: readonly PolicyTarget[];
  /** Every IP of `targets`, per family. */
  readonly targetIPs: PerFamily<readonly string[]>;
  readonly ingress: CompiledDirection;
  readonly egress: CompiledDirection;
}

export interface LocalPodDirection {
  /** At least one policy isolates the pod in this direction: only what those policies allow passes. */
  readonly isolated: boolean;
  /** A policy isolating the pod in this direction failed to compile: drop everything in this direction. */
  readonly failClosed: boolean;
  /** Ids of the policies that isolate the pod in this direction, sorted. */
  readonly policies: readonly string[];
}

/** A pod on this node that network policy applies to. */
export interface LocalPod {
  readonly id: string;
  readonly namespace: string;
  readonly name: string;
  readonly ips: PerFamily<readonly string[]>;
  readonly ingress: LocalPodDirection;
  readonly egress: LocalPodDirection;
}

export type ProblemSeverity = 'error' | 'warning';

/**
 * Something wrong with a policy. Errors make the affected direction fail closed (`direction` absent: the whole
 * policy); warnings change nothing but are worth telling the policy's author.
 */
export interface PolicyProblem {
  readonly policy: string;
  readonly severity: ProblemSeverity;
  readonly direction?: Direction;
  /** Where in the object, e.g. `spec.ingress[0].from[1].ipBlock.except[0]`. */
  readonly path: string;
  readonly message: string;
}

/**
 * Something wrong with a pod that policies read (a named container port outside 1..65535). The offending part is left
 * out of the model, so that it never reaches a rule; the pod's owner is the one to tell.
 */
export interface PodProblem {
  /** `namespace/name`. */
  readonly pod: string;
  /** Where in the object, e.g. `spec.containers[0].ports[1].containerPort`. */
  readonly path: string;
  readonly message: string;
}

export interface PolicyModel {
  readonly nodeName: string;
  /** Policies selecting at least one local pod, sorted by id. */
  readonly policies: readonly CompiledPolicy[];
  /** Every local pod network policy applies to (isolated or not), sorted by id. */
  readonly pods: readonly LocalPod[];
  /** Problems of every policy in the cluster, sorted by policy and path. */
  readonly problems: readonly PolicyProblem[];
  /** Problems of every pod in the cluster that policies read, sorted by pod and path. */
  readonly podProblems: readonly PodProblem[];
  /** Changes whenever anything above changes. */
  readonly fingerprint: string;
}
