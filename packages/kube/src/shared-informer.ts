import { ListWatch } from '@kubernetes/client-node';
import type { KubeConfig, KubernetesListObject, KubernetesObject, Watch } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { describeKubeError, statusCodeOf } from './api-errors.js';
import { Backoff } from './backoff.js';
import type { BackoffOptions } from './backoff.js';
import { listPage } from './http-list.js';
import type { RawListPage } from './http-list.js';
import { HttpWatch } from './http-watch.js';
import { InformerChangeTracker } from './informer-changes.js';
import type { ChangeTracker } from './informer-changes.js';
import type { WatchedObject } from './http-watch.js';
import { Indexer, objectId } from './indexer.js';
import type { IndexFunction } from './indexer.js';
import type { InformerMetrics } from './informer-metrics.js';
import { ObjectReader, skippedObjectKey } from './object-reader.js';
import type { ObjectReading, SkipReason, SkippedObjectIdentity } from './object-reader.js';
import type { ResourceDescriptor } from './resources.js';

/** An object an informer skipped because it could not read it, for the agent's Warning event. */
export interface SkippedObject {
  /** The informer key, e.g. `pods`. */
  informer: string;
  apiVersion: string;
  kind: string;
  reason: SkipReason;
  problem: string;
  identity: SkippedObjectIdentity;
}

/** Narrows an informer to part of a resource type, for example the pods of one node. */
export interface InformerScope {
  fieldSelector?: string;
  labelSelector?: string;
}

/** How one informer is doing, for readiness, logs and tests. */
export interface InformerStatus {
  /** The informer key: the resource name, with its selectors if it is scoped. */
  key: string;
  resource: string;
  synced: boolean;
  watchHealthy: boolean;
  /** Since when the watch has been down, if it is (including before the first watch). */
  downSinceMs?: number;
  /** The last list or watch failure. */
  lastError?: string;
  restarts: number;
  objects: number;
  /** Requests this informer made, for tests and the benchmark. */
  lists: number;
  watches: number;
}

export interface SharedInformerOptions<T extends KubernetesObject> {
  key: string;
  descriptor: ResourceDescriptor;
  scope: InformerScope;
  kubeConfig: KubeConfig;
  logger: Logger;
  /** Called once per version of a named object that cannot be read (it is skipped), to give it a Warning event. */
  onSkipped?: (skipped: SkippedObject) => void;
  metrics: InformerMetrics;
  indexes: Record<string, IndexFunction<T>>;
  restartBackoff: BackoffOptions;
  /** A failure more than this long after the previous one restarts the backoff from its initial delay. */
  backoffResetMs: number;
  requestTimeoutMs: number;
  /** Each watch request lasts a random time between this and twice this, as in client-go. */
  watchTimeoutSeconds: number;
  pageSize: number;
  now: () => number;
}

/**
 * One list+watch of one resource type (or one scope of it), shared by every consumer. client-node's ListWatch does
 * the listing, watching, resuming from the last resource version and relisting on 410 Gone; this adds what it lacks:
 * the watchdog (ListWatch stops for good on any other error and only emits 'error'), paged lists with timeouts,
 * secondary indexes, coalesced change notifications and a sync/health status.
 */
export class SharedInformer<T extends KubernetesObject> {
  readonly key: string;
  readonly #options: SharedInformerOptions<T>;
  readonly #listWatch: ListWatch<T>;
  readonly #indexer: Indexer<T>;
  readonly #handlers = new Set<() => void>();
  readonly #trackers = new Set<InformerChangeTracker<T>>();
  readonly #backoff: Backoff;
  readonly #log: Logger;
  readonly #reader: ObjectReader<T>;
  /** Objects skipped as unreadable, by key, with the resourceVersion and problem last reported (each once). */
  readonly #skipped = new Map<string, string>();
  #notifyScheduled = false;
  #running = false;
  #stopping = new AbortController();
  #listedOnce = false;
  #synced = false;
  #syncWaiters: (() => void)[] = [];
  #healthy = false;
  #downSince: number | undefined;
  #lastError: string | undefined;
  #lastFailureAt: number | undefined;
  #restartTimer: NodeJS.Timeout | undefined;
  #restarts = 0;
  #lists = 0;
  #watches = 0;

  constructor(options: SharedInformerOptions<T>) {
    this.key = options.key;
    this.#options = options;
    this.#indexer = new Indexer(options.indexes);
    this.#backoff = new Backoff(options.restartBackoff);
    this.#log = options.logger.child({ informer: options.key });
    this.#reader = new ObjectReader(options.descriptor);
    const watch = new HttpWatch(options.kubeConfig, {
      connectTimeoutMs: options.requestTimeoutMs,
      timeoutSeconds: () => Math.floor(options.watchTimeoutSeconds * (1 + Math.random())),
      beforeWatch: () => this.#beforeWatch(),
      onConnected: () => this.#onConnected(),
      readObject: (object, eventType) => this.#readWatched(object, eventType),
      onMalformedEvent: (problem) => this.#onMalformedEvent(problem),
      onExpired: (message) => this.#onExpired(message),
      onHandlerFailure: (error) => this.#onError(error),
    });
    this.#listWatch = new ListWatch<T>(
      options.descriptor.path,
      // HttpWatch has Watch's shape; see there why the informers do not use client-node's own.
      watch as unknown as Watch,
      () => this.#list(),
      false,
      options.scope.labelSelector,
      options.scope.fieldSelector,
    );
    // Registered first, so indexes are current when consumers hear of a change.
    this.#listWatch.on('add', (object) => this.#upsert(object));
    this.#listWatch.on('update', (object) => this.#upsert(object));
    this.#listWatch.on('delete', (object) => this.#remove(object));
    this.#listWatch.on('error', (error: unknown) => this.#onError(error));
    options.metrics.register(this.key);
  }

  get resource(): string {
    return this.#options.descriptor.name;
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#stopping = new AbortController();
    this.#downSince ??= this.#options.now();
    void this.#listWatch.start().catch((error: unknown) => this.#onError(error));
  }

  async stop(): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    clearTimeout(this.#restartTimer);
    this.#restartTimer = undefined;
    this.#stopping.abort();
    await this.#listWatch.stop();
    this.#setHealthy(false);
  }

  get running(): boolean {
    return this.#running;
  }

  hasSynced(): boolean {
    return this.#synced;
  }

  /** Resolves once the first list has been loaded into the cache. */
  whenSynced(): Promise<void> {
    if (this.#synced) return Promise.resolve();
    return new Promise((resolve) => this.#syncWaiters.push(resolve));
  }

  onChange(handler: () => void): () => void {
    const entry = (): void => handler();
    this.#handlers.add(entry);
    return () => this.#handlers.delete(entry);
  }

  /** Collects the objects of every add, update and delete from now on, for a consumer that reads only what changed. */
  trackChanges(limit?: number): ChangeTracker<T> {
    const tracker: InformerChangeTracker<T> = new InformerChangeTracker<T>(() => this.#trackers.delete(tracker), limit);
    this.#trackers.add(tracker);
    return tracker;
  }

  get(name: string, namespace?: string): T | undefined {
    return this.#listWatch.get(name, namespace);
  }

  list(namespace?: string): T[] {
    return this.#listWatch.list(namespace) as T[];
  }

  byIndex(index: string, key: string): T[] {
    return this.#indexer.byIndex(index, key);
  }

  status(): InformerStatus {
    return {
      key: this.key,
      resource: this.resource,
      synced: this.#synced,
      watchHealthy: this.#healthy,
      ...(this.#downSince !== undefined && { downSinceMs: this.#downSince }),
      ...(this.#lastError !== undefined && { lastError: this.#lastError }),
      restarts: this.#restarts,
      objects: this.#indexer.size,
      lists: this.#lists,
      watches: this.#watches,
    };
  }

  async #list(): Promise<KubernetesListObject<T>> {
    this.#lists++;
    const { descriptor, kubeConfig, scope, pageSize, requestTimeoutMs } = this.#options;
    await this.#reader.load();
    const fetchPage = (params: { limit?: number; continue?: string }): Promise<RawListPage> =>
      listPage(
        kubeConfig,
        descriptor.path,
        { fieldSelector: scope.fieldSelector, labelSelector: scope.labelSelector, ...params },
        `list ${this.key}`,
        requestTimeoutMs,
        this.#stopping.signal,
      );
    const items: T[] = [];
    const skipped = new Set<string>();
    const take = (page: RawListPage): void => {
      for (const raw of page.items) {
        const reading = this.#reader.read(raw);
        if (reading.ok) {
          items.push(reading.object);
        } else {
          this.#reportSkipped(reading);
          skipped.add(skippedObjectKey(reading.identity));
        }
      }
    };
    let resourceVersion = '';
    let token: string | undefined;
    const tokens = new Set<string>();
    do {
      let page: RawListPage;
      try {
        page = await fetchPage({ ...(pageSize > 0 && { limit: pageSize }), ...(token && { continue: token }) });
      } catch (error) {
        // An expired continue token: the snapshot is gone, so read everything at once, as client-go does.
        if (token === undefined || statusCodeOf(error) !== 410) throw error;
        const full = await fetchPage({});
        items.length = 0;
        skipped.clear();
        take(full);
        resourceVersion = full.resourceVersion;
        break;
      }
      take(page);
      resourceVersion = page.resourceVersion || resourceVersion;
      token = page.continueToken;
      if (token !== undefined) {
        if (tokens.has(token)) throw new Error(`list ${this.key}: the API server repeated a continue token`);
        tokens.add(token);
      }
    } while (token !== undefined);
    if (!resourceVersion) throw new Error(`list ${this.key}: the API server returned no resourceVersion`);
    // Objects skipped before that are readable now, or gone, are forgotten: if they break again, that is news.
    for (const key of this.#skipped.keys()) if (!skipped.has(key)) this.#skipped.delete(key);
    this.#listedOnce = true;
    return { metadata: { resourceVersion }, items };
  }

  /** The watch only starts after a list, which loaded the schema. */
  #readWatched(raw: unknown, eventType: string): WatchedObject {
    const reading = this.#reader.read(raw);
    if (reading.ok) {
      this.#skipped.delete(objectId(reading.object));
      return { readable: true, object: reading.object };
    }
    // The deletion of a named object that could not be read is no news, and it is not skipped any more.
    if (eventType === 'DELETED' && reading.identity) this.#skipped.delete(skippedObjectKey(reading.identity));
    else this.#reportSkipped(reading);
    return { readable: false, ...(reading.identity && { identity: reading.identity }) };
  }

  /** Logs, counts and hands on a skipped object once per version (a relist or a resumed watch repeats it). */
  #reportSkipped(reading: Extract<ObjectReading<T>, { ok: false }>): void {
    const { identity, reason, problem } = reading;
    const key = skippedObjectKey(identity);
    const seen = `${identity?.resourceVersion ?? ''} ${problem}`;
    if (identity && this.#skipped.get(key) === seen) return;
    if (identity) this.#skipped.set(key, seen);
    this.#options.metrics.skipped(this.key, reason);
    this.#log.warn(
      { object: key, ...(identity?.resourceVersion && { resourceVersion: identity.resourceVersion }), reason, problem },
      `skipping a ${this.#options.descriptor.kind} the agent cannot read`,
    );
    if (!identity || !this.#options.onSkipped) return;
    const { apiVersion, kind } = this.#options.descriptor;
    try {
      this.#options.onSkipped({ informer: this.key, apiVersion, kind, reason, problem, identity });
    } catch (error) {
      this.#log.error({ err: describeKubeError(error) }, 'the handler of skipped objects threw');
    }
  }

  #onMalformedEvent(problem: string): void {
    this.#options.metrics.skipped(this.key, 'malformed_event');
    this.#log.warn({ reason: 'malformed_event', problem }, 'skipping a malformed watch event');
  }

  /**
   * A resume point the API server no longer keeps (etcd compacted past it, or a restored or replaced server): the
   * ListWatch relists, and whatever changed meanwhile reaches the cache then. Worth a line: after an outage every
   * informer does this at once, each a full list.
   */
  #onExpired(message: string): void {
    this.#options.metrics.expired(this.key);
    this.#log.info({ message }, 'watch expired (410 Gone): relisting');
  }

  /** Called by the watch transport right before each watch request: the list (if any) is in the cache by then. */
  #beforeWatch(): boolean {
    if (!this.#running) return false;
    this.#watches++;
    if (this.#listedOnce && !this.#synced) {
      this.#synced = true;
      this.#log.debug({ objects: this.#indexer.size }, 'informer synced');
      for (const resolve of this.#syncWaiters.splice(0)) resolve();
    }
    return true;
  }

  #onConnected(): void {
    if (!this.#running) return;
    if (!this.#healthy && this.#lastError !== undefined) this.#log.info('watch restored');
    this.#downSince = undefined;
    this.#setHealthy(true);
  }

  #onError(error: unknown): void {
    // ListWatch also reports the abort of its own request when stopped.
    if (!this.#running) return;
    const now = this.#options.now();
    if (this.#lastFailureAt !== undefined && now - this.#lastFailureAt > this.#options.backoffResetMs) {
      this.#backoff.reset();
    }
    this.#lastFailureAt = now;
    this.#lastError = describeKubeError(error);
    this.#downSince ??= now;
    this.#setHealthy(false);
    if (this.#restartTimer) return;
    const delayMs = this.#backoff.next();
    this.#log.warn({ err: this.#lastError, retryInMs: delayMs }, 'informer list/watch failed; restarting it');
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = undefined;
      if (!this.#running) return;
      this.#restarts++;
      this.#options.metrics.restarted(this.key);
      void this.#listWatch.start().catch((restartError: unknown) => this.#onError(restartError));
    }, delayMs);
  }

  #setHealthy(healthy: boolean): void {
    this.#healthy = healthy;
    this.#options.metrics.healthy(this.key, healthy);
  }

  #upsert(object: T): void {
    this.#indexer.upsert(object);
    for (const tracker of this.#trackers) tracker.record(object, false);
    this.#scheduleNotify();
  }

  #remove(object: T): void {
    this.#indexer.remove(object);
    for (const tracker of this.#trackers) tracker.record(object, true);
    this.#scheduleNotify();
  }

  /** Consumers only request syncs, so one call per burst of events (a list of 10k pods) is enough. */
  #scheduleNotify(): void {
    if (this.#notifyScheduled) return;
    this.#notifyScheduled = true;
    setImmediate(() => {
      this.#notifyScheduled = false;
      this.#options.metrics.objects(this.key, this.#indexer.size);
      for (const handler of this.#handlers) {
        try {
          handler();
        } catch (error) {
          this.#log.error({ err: describeKubeError(error) }, 'change handler threw');
        }
      }
    });
  }
}
