import type { Afi, ApiPath, ApiPeer, DefinedSet, GlobalConfig, GobgpClient, PeerConfig, RoutingPolicy, WatchHandlers } from '../gobgp-api.js';
import { pathPrefix } from '../paths.js';

/**
 * A stand-in for gobgpd's API, holding its global config, peers, paths and policy as gobgpd would. The same paths
 * against a real gobgpd are in routing-bgp.real.test.ts and external-peers.real.test.ts; the unit tests make with it
 * the faults (a refused policy, a failing call, an agent restarted beside a running gobgpd) that the real ones cannot.
 */
export class FakeGobgpd {
  global: GlobalConfig | undefined;
  readonly peers = new Map<string, PeerConfig>();
  /** Peers gobgpd reports beyond those configured through the API (added by hand with gobgp's CLI). */
  readonly extraPeers: ApiPeer[] = [];
  readonly paths: ApiPath[] = [];
  policy: RoutingPolicy | undefined;
  readonly assignments = new Map<string, { policies: { name: string }[]; defaultAction: string }>();
  /** Every neighbor set of every SetPolicies call, in order. */
  readonly policyHistory: Record<string, string[]>[] = [];
  readonly calls: string[] = [];
  refusePolicies = false;
  /** Calls that fail, by method name, with the error they fail with. */
  readonly failing = new Map<keyof GobgpClient, Error>();
  /** The handlers of the open event watch, if any. */
  watch: WatchHandlers | undefined;
  /** How many times each method answered (or failed): what a sync costs gobgpd. */
  readonly answered = new Map<keyof GobgpClient, number>();

  client(): GobgpClient {
    const fake: Partial<Record<keyof GobgpClient, unknown>> = {
      close: () => undefined,
      waitReady: () => this.#answer('waitReady', undefined),
      getBgp: () => this.#answer('getBgp', this.global ? { asn: this.global.asn, routerId: this.global.routerId } : undefined),
      startBgp: (global: GlobalConfig) => {
        this.global = global;
        return this.#answer('startBgp', undefined);
      },
      listPeers: () => this.#answer('listPeers', [...[...this.peers.values()].map(listed), ...this.extraPeers]),
      addPeer: (peer: PeerConfig) => {
        this.calls.push(`add ${peer.neighborAddress}`);
        this.peers.set(peer.neighborAddress, peer);
        return this.#answer('addPeer', undefined);
      },
      deletePeer: (address: string) => {
        this.calls.push(`delete ${address}`);
        this.peers.delete(address);
        return this.#answer('deletePeer', undefined);
      },
      listGlobalPaths: (afi: Afi) => this.#answer('listGlobalPaths', this.paths.filter((path) => path.family?.afi === afi)),
      listRoutingPaths: (afi: Afi) => this.#answer('listRoutingPaths', this.paths.filter((path) => path.family?.afi === afi)),
      addPath: (path: ApiPath) => {
        this.calls.push(`add-path ${pathPrefix(path)}`);
        this.paths.push(path);
        return this.#answer('addPath', undefined);
      },
      deletePath: (path: ApiPath) => {
        this.calls.push(`delete-path ${pathPrefix(path)}`);
        const index = this.paths.findIndex((p) => pathPrefix(p) === pathPrefix(path) && p.neighborIp === path.neighborIp);
        if (index >= 0) this.paths.splice(index, 1);
        return this.#answer('deletePath', undefined);
      },
      addPathsInBulk: () => Promise.resolve(),
      setPolicies: (policy: RoutingPolicy) => {
        if (this.refusePolicies) return Promise.reject(new Error('policy refused'));
        this.policy = policy;
        this.policyHistory.push(neighborSets(policy.definedSets));
        return Promise.resolve();
      },
      getGlobalPolicyAssignment: (direction: string) => {
        const assignment = this.assignments.get(direction);
        return Promise.resolve(assignment && { name: 'global', direction, ...assignment });
      },
      setGlobalPolicyAssignment: (direction: string, names: readonly string[], defaultAction: string) => {
        this.assignments.set(direction, { policies: names.map((name) => ({ name })), defaultAction });
        return Promise.resolve();
      },
      softResetAllPeers: () => Promise.resolve(),
      watchEvents: (handlers: WatchHandlers) => {
        this.watch = handlers;
        return () => (this.watch = undefined);
      },
    };
    return fake as unknown as GobgpClient;
  }

  #answer<T>(method: keyof GobgpClient, value: T): Promise<T> {
    this.answered.set(method, (this.answered.get(method) ?? 0) + 1);
    const error = this.failing.get(method);
    return error ? Promise.reject(error) : Promise.resolve(value);
  }
}

/** A peer as ListPeer reports a configured one. */
export function listed(peer: PeerConfig): ApiPeer {
  return {
    conf: { neighborAddress: peer.neighborAddress, peerAsn: peer.peerAsn, authPassword: peer.password ?? '' },
    transport: { remotePort: peer.remotePort, ...(peer.localAddress && { localAddress: peer.localAddress }) },
    timers: { config: { holdTime: peer.holdTimeSeconds } },
    afiSafis: peer.families.map((afi) => ({ config: { family: { afi, safi: 'SAFI_UNICAST' }, enabled: true } })),
  };
}

function neighborSets(sets: readonly DefinedSet[]): Record<string, string[]> {
  return Object.fromEntries(sets.filter((set) => set.definedType === 'NEIGHBOR').map((set) => [set.name, set.list ?? []]));
}
