import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { CoreV1Event, KubeConfig, KubernetesObject, V1ObjectReference } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { describeKubeError, statusCodeOf } from './api-errors.js';
import { callApi } from './request-options.js';

export const EVENT_SOURCE_COMPONENT = 'kube-router';

export type EventType = 'Normal' | 'Warning';

/** An object the event is about: any Kubernetes object with kind and name, or an object reference. */
export type InvolvedObject = KubernetesObject | V1ObjectReference;

export interface EventRecorderOptions {
  kubeConfig: KubeConfig;
  /** The node this agent runs on: the event source's host and the reporting instance. */
  nodeName: string;
  logger: Logger;
  /** Default kube-router. */
  component?: string;
  /** Bound on each API call. Default 10 s. */
  requestTimeoutMs?: number;
  /** How many distinct events are remembered for aggregation. Default 4096. */
  cacheSize?: number;
  now?: () => number;
}

/** The API server's limit on an Event message. */
const MAX_MESSAGE_BYTES = 1024;

interface Series {
  namespace: string;
  /** The Event's name once created. */
  name: string | undefined;
  involvedObject: V1ObjectReference;
  type: EventType;
  reason: string;
  message: string;
  firstTimestamp: Date;
  lastTimestamp: Date;
  /** Occurrences so far, and how many the API server has been told of. */
  count: number;
  written: number;
  writing: Promise<void> | undefined;
}

/**
 * Records core/v1 Events about single objects, for sync failures an operator should see with `kubectl describe`.
 * Repeats of one event (same object, type, reason and message) update its count and lastTimestamp instead of adding
 * Events; repeats that come while a write is under way are folded into the next write. Nothing ever throws into the
 * caller: a failed write is logged. The returned promises resolve when the write is done, for callers that care.
 */
export class EventRecorder {
  readonly #api: CoreV1Api;
  readonly #options: EventRecorderOptions;
  readonly #series = new Map<string, Series>();
  readonly #now: () => number;
  readonly #log: Logger;
  #sequence = 0;

  constructor(options: EventRecorderOptions) {
    this.#options = options;
    this.#api = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#now = options.now ?? Date.now;
    this.#log = options.logger.child({ component: 'event-recorder' });
  }

  warning(object: InvolvedObject, reason: string, message: string): Promise<void> {
    return this.record(object, 'Warning', reason, message);
  }

  normal(object: InvolvedObject, reason: string, message: string): Promise<void> {
    return this.record(object, 'Normal', reason, message);
  }

  record(object: InvolvedObject, type: EventType, reason: string, message: string): Promise<void> {
    try {
      const involvedObject = referenceTo(object);
      const text = truncate(message, MAX_MESSAGE_BYTES);
      const key = JSON.stringify([
        involvedObject.kind,
        involvedObject.namespace ?? '',
        involvedObject.name,
        involvedObject.uid ?? '',
        type,
        reason,
        text,
      ]);
      const now = new Date(this.#now());
      let series = this.#series.get(key);
      if (series) {
        // Most recently used last, so that eviction drops the stalest.
        this.#series.delete(key);
      } else {
        series = {
          namespace: involvedObject.namespace || 'default',
          name: undefined,
          involvedObject,
          type,
          reason,
          message: text,
          firstTimestamp: now,
          lastTimestamp: now,
          count: 0,
          written: 0,
          writing: undefined,
        };
      }
      this.#series.set(key, series);
      this.#evict();
      series.count++;
      series.lastTimestamp = now;
      return this.#write(series);
    } catch (error) {
      this.#log.warn({ err: describeKubeError(error), reason }, 'could not record an event');
      return Promise.resolve();
    }
  }

  /** Waits for every write under way, for a clean shutdown. */
  async flush(): Promise<void> {
    await Promise.all([...this.#series.values()].map((series) => series.writing));
  }

  #write(series: Series): Promise<void> {
    series.writing ??= this.#drain(series).finally(() => {
      series.writing = undefined;
    });
    return series.writing;
  }

  async #drain(series: Series): Promise<void> {
    while (series.written < series.count) {
      const count = series.count;
      try {
        if (series.name === undefined) await this.#create(series, count);
        else await this.#bump(series, series.name, count);
      } catch (error) {
        if (series.name !== undefined && statusCodeOf(error) === 404) {
          // The Event expired (the API server keeps them for an hour by default): start a new one.
          series.name = undefined;
          series.firstTimestamp = series.lastTimestamp;
          continue;
        }
        this.#log.warn(
          {
            err: describeKubeError(error),
            involvedObject: `${series.involvedObject.kind}/${series.involvedObject.namespace ?? ''}/${series.involvedObject.name}`,
            reason: series.reason,
          },
          'could not record an event',
        );
      }
      series.written = count;
    }
  }

  async #create(series: Series, count: number): Promise<void> {
    const name = `${series.involvedObject.name}.${this.#uniqueSuffix()}`;
    const body: CoreV1Event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name, namespace: series.namespace },
      involvedObject: series.involvedObject,
      type: series.type,
      reason: series.reason,
      message: series.message,
      source: { component: this.#component, host: this.#options.nodeName },
      reportingComponent: this.#component,
      reportingInstance: this.#options.nodeName,
      firstTimestamp: series.firstTimestamp,
      lastTimestamp: series.lastTimestamp,
      count,
    };
    await callApi(`create event ${series.namespace}/${name}`, this.#timeoutMs, (options) =>
      this.#api.createNamespacedEvent({ namespace: series.namespace, body }, options),
    );
    series.name = name;
  }

  async #bump(series: Series, name: string, count: number): Promise<void> {
    const body = { count, lastTimestamp: series.lastTimestamp.toISOString() };
    await callApi(`update event ${series.namespace}/${name}`, this.#timeoutMs, (options) =>
      this.#api.patchNamespacedEvent(
        { namespace: series.namespace, name, body },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch, options),
      ),
    );
  }

  #evict(): void {
    const limit = this.#options.cacheSize ?? 4096;
    for (const [key, series] of this.#series) {
      if (this.#series.size <= limit) break;
      if (series.writing) continue;
      this.#series.delete(key);
    }
  }

  /** client-go's `<object>.<hex nanoseconds>`, with a sequence number so that two events in one millisecond differ. */
  #uniqueSuffix(): string {
    const nanos = BigInt(this.#now()) * 1_000_000n + BigInt(this.#sequence++ % 1_000_000);
    return nanos.toString(16);
  }

  get #component(): string {
    return this.#options.component ?? EVENT_SOURCE_COMPONENT;
  }

  get #timeoutMs(): number {
    return this.#options.requestTimeoutMs ?? 10_000;
  }
}

function referenceTo(object: InvolvedObject): V1ObjectReference {
  const meta = 'metadata' in object && object.metadata ? object.metadata : undefined;
  const reference = meta
    ? {
        apiVersion: object.apiVersion,
        kind: object.kind,
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        resourceVersion: meta.resourceVersion,
      }
    : (object as V1ObjectReference);
  if (!reference.kind || !reference.name) {
    throw new Error('the involved object of an event needs a kind and a name');
  }
  return Object.fromEntries(Object.entries(reference).filter(([, value]) => value !== undefined && value !== '')) as V1ObjectReference;
}

function truncate(message: string, maxBytes: number): string {
  if (Buffer.byteLength(message) <= maxBytes) return message;
  let end = Math.min(message.length, maxBytes);
  while (end > 0 && Buffer.byteLength(message.slice(0, end)) > maxBytes - 3) end--;
  return `${message.slice(0, end)}...`;
}
