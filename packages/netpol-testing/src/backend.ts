import type { ControllerPlugin } from '@kube-router/controller';
import type { CommandRunner, CommandSpec, Mutex } from '@kube-router/netfilter';
import type { IpFamily, NetworkPolicySpecLike } from '@kube-router/netpol';
import type { BackendWorld } from '@kube-router/testkit/netpol-conformance';

/** Runs a command in the lab node's network namespace and resolves with its stdout. */
export type InNode = BackendWorld<unknown, unknown>['inNode'];

/** What a kernel probe may read of the world: the node's namespace, the lab's pods, the API server. */
export type ProbedWorld = Pick<BackendWorld<unknown, unknown>, 'inNode' | 'lab' | 'api'>;

/**
 * A netpol backend as the shared suites test it: its plugin, and how to read and break what it keeps in the kernel.
 * Every case is written once, in this package, and runs on each backend through these.
 */
export interface NetpolTestBackend {
  /** In the suites' titles: `iptables`, `nftables`. */
  readonly name: string;
  /** The tools its real tests need, besides `ip`. */
  readonly tools: readonly string[];
  /** The backend's plugin; with `runner`, its commands go through that runner (a test breaks them on purpose). */
  createPlugin(overrides?: { readonly runner?: CommandRunner }): ControllerPlugin<unknown>;
  /** The process-wide locks its commands take: the contract suite's `hang` holds them. */
  readonly locks: readonly Mutex[];
  readonly kernel: NetpolKernelProbe;
}

/** How a suite reads and breaks a backend's kernel state. */
export interface NetpolKernelProbe {
  /** The names of our chains, sets and maps of one family in the node's kernel (none when it holds none). */
  objects(inNode: InNode, family: IpFamily): Promise<string[]>;
  /** Everything of ours as the kernel lists it, precise enough that an object written again shows. */
  snapshot(inNode: InNode): Promise<string>;
  /** Makes the policies that isolate web/server's ingress stop working in both families, as drift would. */
  breakServerIngress(world: ProbedWorld): Promise<void>;
  /** The rules of one of our IPv4 chains, as the kernel lists them. */
  chainRules(inNode: InNode, chain: string): Promise<string[]>;
  /**
   * Someone else's edit of one of our IPv4 chains: its first rule replaced in place by one that lets every packet
   * through, the chain's rule count (and anything else it is known by) unchanged.
   */
  allowEverySource(inNode: InNode, chain: string): Promise<void>;
  /**
   * Puts an object of the wrong kind where one of the policy's objects must go, so that the kernel refuses the policy.
   * Resolves with that object's name and, when known, what the kernel's refusal says.
   */
  obstructPolicy(world: ProbedWorld, policy: { namespace: string; name: string; spec: NetworkPolicySpecLike }): Promise<{ object: string; refusal?: RegExp }>;
  /**
   * Another tool's reference to one of our IPv4 chains, so that the kernel refuses to delete it. Resolves with the
   * name the sync's failure carries, and a check that the reference is still there.
   */
  referenceChain(inNode: InNode, chain: string): Promise<{ failure: string; referenced(): Promise<boolean> }>;
  /** The removal of a disabled family's objects: a command of it, for a test to refuse once, and the failure's name. */
  readonly disabledFamilyRemoval: { matches(spec: CommandSpec): boolean; readonly failure: string };
}
