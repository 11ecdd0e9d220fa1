import type { Logger } from 'pino';
import type { HealthRegistry, SyncOutcome } from '@kube-router/healthcheck';
import type { AgentMetrics } from '@kube-router/metrics';

/** Why a sync runs: the initial one, the periodic one, a retry after a failure, or a request from an event. */
export type SyncReason = 'initial' | 'periodic' | 'retry' | (string & {});

/**
 * Whether a sync of this reason is a full one, that reads the kernel back instead of trusting what the controller
 * wrote last: the initial sync (nothing written yet), the periodic one (drift repair) and a retry (the failed sync
 * may have left the kernel anywhere). A sync an event asked for trusts its own bookkeeping.
 */
export function isFullSync(reason: SyncReason): boolean {
  return reason === 'initial' || reason === 'periodic' || reason === 'retry';
}

/** What the scheduler hands a controller when it starts. */
export interface ControllerStartContext {
  /** Asks for a sync soon. Requests are coalesced: at most one is pending, whatever the number of events. */
  requestSync(reason: string): void;
  /** Aborted when the agent stops. */
  signal: AbortSignal;
}

/**
 * A controller as the agent's scheduler sees it. The scheduler owns the loop; the controller performs syncs.
 */
export interface Controller {
  /** Stable id: the `controller` label of the sync metrics and the name of its health check. */
  readonly name: string;
  /** A sync runs at least this often. */
  readonly syncPeriodMs: number;
  /** Triggered syncs run at most this often. */
  readonly minSyncIntervalMs: number;
  /** Wires informers and returns; it does not sync. */
  start(ctx: ControllerStartContext): Promise<void>;
  /** Performs one observed sync: beat, sync, beat, recordSyncResult. Never throws. */
  runObservedSync(reason: SyncReason): Promise<SyncOutcome>;
  /** Releases what start acquired. The scheduler calls it after the last sync has ended. */
  stop(): Promise<void>;
}

/** A typed key for a service that one plugin (or the agent) provides and others consume. */
export interface ServiceKey<T> {
  readonly id: string;
  /** Carries T for inference only; never set. */
  readonly _type?: T;
}

export function defineServiceKey<T>(id: string): ServiceKey<T> {
  return { id };
}

export interface Services {
  get<T>(key: ServiceKey<T>): T;
  has(key: ServiceKey<unknown>): boolean;
  provide<T>(key: ServiceKey<T>, service: T): void;
}

/** What the agent gives a plugin's `create`. */
export interface PluginContext {
  /** This node's name (NODE_NAME or --hostname-override). */
  nodeName: string;
  /** A child logger with `controller` set to the plugin's name. */
  logger: Logger;
  metrics: AgentMetrics;
  health: HealthRegistry;
  /** Services of the agent (the Kubernetes client, informers) and of the plugins this one requires. */
  services: Services;
}

/** A parser of a plugin's options: zod schemas satisfy it. It throws a readable error on bad options. */
export interface OptionsSchema<O> {
  parse(input: unknown): O;
}

/**
 * A plugin is a plain object satisfying this type. The agent validates names and requirements when it assembles
 * plugins, parses each plugin's options with its schema, and creates controllers in dependency order.
 */
export interface ControllerPlugin<O = unknown> {
  /** Unique name; also the controller name unless the plugin chooses another. */
  readonly name: string;
  /**
   * The versions of this plugin contract (PLUGIN_CONTRACT_VERSION, not the package's version) the plugin works with, as a
   * semver range such as `^1.0.0`. The agent refuses an assembly whose contract is outside a plugin's range, naming
   * both, instead of failing later on a missing field.
   */
  readonly host: string;
  /** Names of plugins that must be in the assembly and created before this one. */
  readonly requires?: readonly string[];
  readonly options: OptionsSchema<O>;
  create(ctx: PluginContext, options: O): Controller | Promise<Controller>;
  /**
   * The executables its controller runs with these options (`gobgpd`, `nft`, ...), by name or path. The agent says
   * at start, in one line, which of them are not installed, and keeps the controller not ready while one is missing:
   * an image without gobgpd otherwise looked healthy while BGP never started. The controller runs all the same; its
   * syncs fail and count as any failure does, and liveness is untouched (a restart installs nothing).
   */
  tools?(options: O): readonly string[];
  /**
   * The kernel features its controller needs with these options, each known by a path that exists only where the
   * running kernel (in the agent's network namespace) has it: IPVS by /proc/net/ip_vs. As with `tools`, the agent says
   * at start, in one line, which are missing and keeps the controller not ready while one is; the controller runs all
   * the same, and its syncs fail and count. A kernel without IPVS otherwise looked ready while no Service was served.
   */
  kernelFeatures?(options: O): readonly KernelFeature[];
  /**
   * kube-router's --cleanup-config: removes every rule, set, table, route, address and interface this plugin owns on
   * the node, and nothing else, then resolves. It runs without informers or a controller, so it must work from the
   * kernel's state alone, and it must succeed when there is nothing to remove. Failures are thrown (joined).
   */
  cleanup?(ctx: CleanupContext, options: O): Promise<void>;
}

/** A kernel feature a plugin needs, and the path that tells whether the running kernel has it. */
export interface KernelFeature {
  /** What an operator knows it by, and the module to load: `IPVS (ip_vs)`. */
  readonly name: string;
  /** A path that exists only when the feature is there: `/proc/net/ip_vs`. */
  readonly path: string;
}

/** What the agent gives a plugin's `cleanup`: no Kubernetes, no metrics; the node's state is all there is. */
export interface CleanupContext {
  nodeName: string;
  logger: Logger;
}

/** Keeps the plugin's option type while checking the object against ControllerPlugin. */
export function definePlugin<O>(plugin: ControllerPlugin<O>): ControllerPlugin<O> {
  return plugin;
}
