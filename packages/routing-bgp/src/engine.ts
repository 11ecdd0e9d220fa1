import type { V1Node } from '@kubernetes/client-node';
import type { SyncFailures } from '@kube-router/controller';
import { messageOf } from '@kube-router/controller';
import type { Logger } from 'pino';
import { BGP_LOCAL_ADDRESSES_ANNOTATION, bgpListenAddresses } from './external-peers.js';
import { GobgpClient } from './gobgp-api.js';
import { GobgpdSupervisor } from './gobgpd.js';
import { generatedRouterId, type NodeAddresses } from './nodes.js';
import type { RoutingCluster, RoutingSettings } from './settings.js';

/** gobgpd's API (apiTarget, apiTimeoutMs, protoDir) and what its global config is made of. */
export interface GobgpEngineOptions
  extends Pick<RoutingSettings, 'apiTarget' | 'apiTimeoutMs' | 'protoDir' | 'bgpPort' | 'routerId' | 'gracefulRestart'> {
  /** A client to use instead of one for apiTarget (a unit test's stand-in). */
  client?: GobgpClient;
  /** Run and supervise gobgpd; absent, the engine drives a gobgpd someone else runs at apiTarget. */
  supervise?: {
    binary: string;
    netns?: string;
    /** A new gobgpd process started: it has no configuration until a sync gives it back. */
    onSpawn(): void;
  };
  logger: Logger;
}

/** Whether gobgpd already ran BGP, or was just given its global configuration (it has forgotten everything else). */
export type BgpState = 'running' | 'started';

/**
 * The BGP speaker: gobgpd as a supervised child process (or someone else's), its API client, and its global
 * configuration. Everything else in gobgpd (peers, policies, paths) belongs to the sync's other stages, which this
 * engine tells nothing: `ensureBgp` answers 'started' when gobgpd lost it all, and the caller lets them know.
 */
export class GobgpEngine {
  #client: GobgpClient | undefined;
  #supervisor: GobgpdSupervisor | undefined;

  constructor(private readonly options: GobgpEngineOptions) {}

  /** The API client, made on first use (constructing one loads gobgp's protos). */
  client(): GobgpClient {
    this.#client ??= this.options.client ?? new GobgpClient({
      target: this.options.apiTarget,
      callTimeoutMs: this.options.apiTimeoutMs,
      ...(this.options.protoDir && { protoDir: this.options.protoDir }),
    });
    return this.#client;
  }

  get supervised(): boolean {
    return this.options.supervise !== undefined;
  }

  /** Starts gobgpd when the engine supervises it. */
  async start(): Promise<void> {
    const supervise = this.options.supervise;
    if (!supervise) return;
    this.#supervisor = new GobgpdSupervisor({
      binary: supervise.binary,
      // gobgpd's --api-hosts and grpc-js read `host:port` and `unix:///path` alike.
      apiHosts: [this.options.apiTarget],
      logger: this.options.logger,
      ...(supervise.netns && { netns: supervise.netns }),
      onSpawn: supervise.onSpawn,
    });
    await this.#supervisor.start();
  }

  /** Why the supervised gobgpd is not running (the readiness check's reason), or undefined while it runs. */
  notRunningReason(): string | undefined {
    return this.#supervisor?.notRunningReason();
  }

  async stop(): Promise<void> {
    this.#client?.close();
    // With graceful restart, gobgpd must not end its sessions with a Cease (SIGTERM makes it deconfigure every
    // peer): killed, it just drops the connections, and its peers keep our routes for the restart time.
    await this.#supervisor?.stop(this.options.gracefulRestart ? { signal: 'SIGKILL' } : {});
  }

  /**
   * gobgpd answers and runs BGP in `localAsn`: StartBgp unless it already runs its global config (a new or restarted
   * process has none). `listenAddresses` undefined (they could not be checked) refuses to start BGP.
   */
  async ensureBgp(addresses: NodeAddresses, localAsn: number, listenAddresses: readonly string[] | undefined): Promise<BgpState> {
    if (this.#supervisor && !this.#supervisor.pid) throw new Error('gobgpd is not running (it exited and is being restarted)');
    const gobgp = this.client();
    await gobgp.waitReady(Math.min(this.options.apiTimeoutMs, 2_000));
    const current = await gobgp.getBgp();
    if (current && current.asn !== 0) {
      if (current.asn !== localAsn) {
        throw new Error(`gobgpd runs with ASN ${current.asn}, wanted ${localAsn}: restart the agent to change the ASN`);
      }
      return 'running';
    }
    // gobgpd cannot change its listeners while it runs: better not start than start on the wrong addresses.
    if (!listenAddresses) throw new Error(`BGP not started: the addresses of ${BGP_LOCAL_ADDRESSES_ANNOTATION} could not be checked`);
    const { bgpPort, gracefulRestart } = this.options;
    const routerId = resolveRouterId(this.options.routerId, addresses);
    await gobgp.startBgp({
      asn: localAsn,
      routerId,
      listenPort: bgpPort,
      listenAddresses: [...listenAddresses],
      ...(gracefulRestart && { gracefulRestart }),
    });
    this.options.logger.info({ asn: localAsn, routerId, port: bgpPort, listenAddresses, gracefulRestart: Boolean(gracefulRestart) }, 'BGP started in gobgpd');
    return 'started';
  }
}

/** --router-id: `generate` hashes one from the node's address (IPv6-only nodes); by default the node's IPv4 address. */
export function resolveRouterId(configured: string | undefined, addresses: NodeAddresses): string {
  if (configured === 'generate') return generatedRouterId(addresses.primary);
  if (configured) return configured;
  const v4 = addresses.byFamily.ipv4;
  if (!v4) throw new Error('the node has no IPv4 address for a router id: set --router-id (an IPv4 address, or generate)');
  return v4;
}

export interface ListenAddressInput {
  node: V1Node;
  addresses: NodeAddresses;
  /** Every address configured on this node's interfaces (`ip address`). */
  localAddresses(): Promise<string[]>;
  warn: RoutingCluster['warn'];
  failures: SyncFailures;
}

/**
 * Where gobgpd listens: kube-router.io/bgp-local-addresses, checked against this node's addresses, else (also when
 * the annotation is bad: a Warning and a failure) the node's own address of each family, as kube-router listens by
 * default. Undefined when the annotation could not be checked (`ip` failed): BGP is then not started this sync.
 */
export async function wantedListenAddresses(input: ListenAddressInput): Promise<string[] | undefined> {
  const { node, failures } = input;
  const nodeListen = Object.values(input.addresses.byFamily);
  if (node.metadata?.annotations?.[BGP_LOCAL_ADDRESSES_ANNOTATION] === undefined) return nodeListen;
  const local = await failures.attempt('bgp-local-addresses', input.localAddresses);
  if (!local) return undefined;
  try {
    return bgpListenAddresses(node, local);
  } catch (error) {
    input.warn(node, 'InvalidBgpLocalAddresses', `gobgpd listens on the node's addresses ${nodeListen.join(', ')}: ${messageOf(error)}`);
    failures.add('bgp-local-addresses', error instanceof Error ? error : new Error(String(error)));
    return nodeListen;
  }
}
