import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import type { AgentMetrics } from '@kube-router/metrics';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { BackoffOptions } from './backoff.js';
import { InformerMetrics } from './informer-metrics.js';
import { indexesFor, makeLister } from './listers.js';
import type { EndpointSliceLister, ListerTypes, NamespacedLister, PodLister, ClusterLister } from './listers.js';
import type { EventRecorder } from './event-recorder.js';
import type { ChangeTracker } from './informer-changes.js';
import { RESOURCES, isResourceName } from './resources.js';
import type { ResourceName, ResourceTypes } from './resources.js';
import { SharedInformer } from './shared-informer.js';
import type { InformerScope, InformerStatus, SkippedObject } from './shared-informer.js';

/** The reason of the Warning event an object gets when the informers cannot read it. */
export const UNREADABLE_OBJECT_EVENT_REASON = 'UnreadableObject';

/** kube-router's --cache-sync-timeout default. */
export const DEFAULT_CACHE_SYNC_TIMEOUT_MS = 60_000;

export interface InformerFactoryOptions {
  kubeConfig: KubeConfig;
  logger: Logger;
  /** Where the informer health series go (the agent's registry). Without it, informers report no metrics. */
  metrics?: AgentMetrics | Registry;
  /**
   * Where the Warning events about objects the informers cannot read go (`kube.events`). Such objects are skipped,
   * logged and counted in any case.
   */
  events?: EventRecorder;
  /** Watchdog restarts after a failed list or watch. Default 1 s doubling up to 30 s. */
  restartBackoff?: BackoffOptions;
  /** Bound on each list request and on waiting for a watch's response headers. Default 60 s. */
  requestTimeoutMs?: number;
  /** Each watch request lasts between this and twice this, then resumes. Default 300 s, as in client-go. */
  watchTimeoutSeconds?: number;
  /** Objects per list page. Default 500, as in client-go. 0 lists in one request. */
  pageSize?: number;
  /** How long a synced informer's watch may stay down before readiness fails. Default 60 s. */
  watchDownGraceMs?: number;
  now?: () => number;
}

export interface StartOptions {
  /** --cache-sync-timeout: how long the first lists may take. Default 1 min. 0 waits for ever. */
  cacheSyncTimeoutMs?: number;
}

/** The informers named in the error did not load their first list in time. */
export class CacheSyncTimeoutError extends Error {
  constructor(
    readonly timeoutMs: number,
    readonly unsynced: readonly InformerStatus[],
  ) {
    const details = unsynced.map(
      (status) => `${status.key} (${status.lastError ? `last error: ${status.lastError}` : 'no answer from the API server yet'})`,
    );
    super(
      `informer caches did not sync within ${formatDuration(timeoutMs)} (--cache-sync-timeout): ${details.join('; ')}`,
    );
    this.name = 'CacheSyncTimeoutError';
  }
}

/**
 * The agent's shared informers: one list+watch per resource type (and scope), however many plugins read it. Plugins
 * take listers and register change handlers while they are created; the agent then starts the factory and waits for
 * the caches to sync before the first syncs run.
 *
 * Change handlers receive no object: informer events only request syncs (`factory.onChange('pods', () =>
 * requestSync('pods'))`), and syncs read the listers. Handlers are called once per burst of changes.
 */
export class InformerFactory {
  readonly #options: InformerFactoryOptions;
  readonly #informers = new Map<string, SharedInformer<KubernetesObject>>();
  readonly #metrics: InformerMetrics;
  readonly #now: () => number;
  #started = false;
  #stopped = false;

  constructor(options: InformerFactoryOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
    const registry = options.metrics && 'registry' in options.metrics ? options.metrics.registry : options.metrics;
    this.#metrics = new InformerMetrics(registry);
  }

  pods(scope?: InformerScope): PodLister {
    return this.lister('pods', scope);
  }

  namespaces(): ClusterLister<ResourceTypes['namespaces']> {
    return this.lister('namespaces');
  }

  nodes(): ClusterLister<ResourceTypes['nodes']> {
    return this.lister('nodes');
  }

  services(scope?: InformerScope): NamespacedLister<ResourceTypes['services']> {
    return this.lister('services', scope);
  }

  endpointSlices(scope?: InformerScope): EndpointSliceLister {
    return this.lister('endpointslices', scope);
  }

  networkPolicies(scope?: InformerScope): NamespacedLister<ResourceTypes['networkpolicies']> {
    return this.lister('networkpolicies', scope);
  }

  /** The lister of a resource type; its informer is created on first use and shared with every other user. */
  lister<R extends ResourceName>(resource: R, scope?: InformerScope): ListerTypes[R] {
    return makeLister(resource, this.#informer(resource, scope));
  }

  /**
   * Calls `handler` (with no arguments) after objects of the resource type were added, changed or deleted, once per
   * burst. Returns a function that removes the handler.
   */
  onChange(resource: ResourceName, handler: () => void, scope?: InformerScope): () => void {
    return this.#informer(resource, scope).onChange(handler);
  }

  /**
   * Collects the objects added, changed or deleted from now on in the resource type's cache, for a consumer whose
   * syncs read only what changed (see ChangeTracker). Make it before the first sync reads the listers: a change is
   * then either in that read or in the next take.
   */
  trackChanges<R extends ResourceName>(
    resource: R,
    options: { readonly scope?: InformerScope; readonly limit?: number } = {},
  ): ChangeTracker<ResourceTypes[R]> {
    return this.#informer(resource, options.scope).trackChanges(options.limit) as unknown as ChangeTracker<ResourceTypes[R]>;
  }

  /**
   * Starts every informer created so far (later ones start when created) and waits until all have synced. It rejects
   * with a CacheSyncTimeoutError naming the informers that did not sync in time and their last errors; the informers
   * keep trying, so the caller decides whether that is fatal.
   */
  async start(options: StartOptions = {}): Promise<void> {
    if (this.#stopped) throw new Error('the informer factory was stopped');
    this.#started = true;
    for (const informer of this.#informers.values()) informer.start();
    await this.waitForCacheSync(options.cacheSyncTimeoutMs ?? DEFAULT_CACHE_SYNC_TIMEOUT_MS);
  }

  /** Waits until every informer created so far has synced; see start. */
  async waitForCacheSync(timeoutMs = DEFAULT_CACHE_SYNC_TIMEOUT_MS): Promise<void> {
    const informers = [...this.#informers.values()];
    const synced = Promise.all(informers.map((informer) => informer.whenSynced()));
    if (timeoutMs <= 0) {
      await synced;
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    try {
      const outcome = await Promise.race([synced, timedOut]);
      if (outcome === 'timeout') {
        const unsynced = informers.filter((informer) => !informer.hasSynced()).map((informer) => informer.status());
        throw new CacheSyncTimeoutError(timeoutMs, unsynced);
      }
    } finally {
      clearTimeout(timer);
    }
  }

  hasSynced(): boolean {
    return [...this.#informers.values()].every((informer) => informer.hasSynced());
  }

  /**
   * For HealthRegistry.addReadinessCheck: a reason while an informer has not synced, or while a synced informer's
   * watch has been down for longer than the grace (a brief reconnect does not flap readiness).
   */
  readonly readinessCheck = (): string | undefined => {
    const now = this.#now();
    const grace = this.#options.watchDownGraceMs ?? 60_000;
    const problems: string[] = [];
    for (const informer of this.#informers.values()) {
      const status = informer.status();
      if (!informer.running) problems.push(`${status.key}: not started`);
      else if (!status.synced) problems.push(`${status.key}: not synced${status.lastError ? ` (${status.lastError})` : ''}`);
      else if (!status.watchHealthy && status.downSinceMs !== undefined && now - status.downSinceMs >= grace) {
        problems.push(
          `${status.key}: watch down for ${formatDuration(now - status.downSinceMs)}${status.lastError ? ` (${status.lastError})` : ''}`,
        );
      }
    }
    return problems.length > 0 ? `informers: ${problems.join('; ')}` : undefined;
  };

  status(): InformerStatus[] {
    return [...this.#informers.values()].map((informer) => informer.status());
  }

  /** Stops every informer. Listers keep answering from the last state of their cache. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all([...this.#informers.values()].map((informer) => informer.stop()));
  }

  #warnSkipped({ apiVersion, kind, identity, problem }: SkippedObject): void {
    const { name, namespace, uid, resourceVersion } = identity;
    void this.#options.events?.warning(
      { apiVersion, kind, name, ...(namespace && { namespace }), ...(uid && { uid }), ...(resourceVersion && { resourceVersion }) },
      UNREADABLE_OBJECT_EVENT_REASON,
      `kube-router cannot read this ${kind} and ignores it until it is fixed: ${problem}`,
    );
  }

  #informer(resource: ResourceName, scope: InformerScope = {}): SharedInformer<KubernetesObject> {
    if (!isResourceName(resource)) throw new Error(`no informer for resource ${String(resource)}`);
    const key = informerKey(resource, scope);
    let informer = this.#informers.get(key);
    if (informer) return informer;
    informer = new SharedInformer<KubernetesObject>({
      key,
      descriptor: RESOURCES[resource],
      scope,
      kubeConfig: this.#options.kubeConfig,
      logger: this.#options.logger,
      ...(this.#options.events && { onSkipped: (skipped: SkippedObject) => this.#warnSkipped(skipped) }),
      metrics: this.#metrics,
      indexes: indexesFor(resource),
      restartBackoff: this.#options.restartBackoff ?? {},
      backoffResetMs: 2 * (this.#options.restartBackoff?.maxMs ?? 30_000),
      requestTimeoutMs: this.#options.requestTimeoutMs ?? 60_000,
      watchTimeoutSeconds: this.#options.watchTimeoutSeconds ?? 300,
      pageSize: this.#options.pageSize ?? 500,
      now: this.#now,
    });
    this.#informers.set(key, informer);
    if (this.#started && !this.#stopped) informer.start();
    return informer;
  }
}

/** `pods`, or `pods{fieldSelector=spec.nodeName=node-1}` for a scoped informer: the `resource` label of its metrics. */
export function informerKey(resource: ResourceName, scope: InformerScope = {}): string {
  const parts = [
    ...(scope.fieldSelector ? [`fieldSelector=${scope.fieldSelector}`] : []),
    ...(scope.labelSelector ? [`labelSelector=${scope.labelSelector}`] : []),
  ];
  return parts.length > 0 ? `${resource}{${parts.join(',')}}` : resource;
}

function formatDuration(ms: number): string {
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms >= 1000) return `${(ms / 1000).toFixed(ms % 1000 === 0 ? 0 : 1)}s`;
  return `${ms}ms`;
}
