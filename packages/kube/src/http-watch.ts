import http from 'node:http';
import https from 'node:https';
import { createInterface } from 'node:readline';
import type { KubeConfig } from '@kubernetes/client-node';

// client-node's ListWatch passes async handlers: what they return is a promise that may reject.
export type WatchEventCallback = (phase: string, object: unknown, event?: unknown) => void | Promise<void>;
export type WatchDone = (error: unknown) => void | Promise<void>;

/** What the informer makes of a watched object: the object to cache, or what is known of one it cannot read. */
export type WatchedObject =
  | { readable: true; object: unknown }
  | { readable: false; identity?: { name: string; namespace?: string; resourceVersion?: string } };

export interface HttpWatchOptions {
  /** Time allowed for the API server to answer a watch request with its headers. */
  connectTimeoutMs: number;
  /** Server-side duration of one watch request, in seconds; the informer then resumes from its resource version. */
  timeoutSeconds: () => number;
  /** Called before each watch request; a false answer (the informer was stopped meanwhile) cancels it. */
  beforeWatch: () => boolean;
  /** The API server accepted the watch. */
  onConnected: () => void;
  /**
   * Reads a watched object into the shape of a listed one, or reports (and has logged and counted) that it cannot be
   * read. It must not throw.
   */
  readObject: (object: unknown, eventType: string) => WatchedObject;
  /** An event line that is JSON but not a watch event (no type, an unknown type, a bookmark without a version). */
  onMalformedEvent: (problem: string) => void;
  /** The API server ended the watch with 410 Gone: its resourceVersion is older than the server keeps, so it relists. */
  onExpired: (message: string) => void;
  /**
   * The ListWatch's handlers failed (threw, or their promise rejected). Nothing else would hear of it: the watch
   * transport is the only caller of those handlers.
   */
  onHandlerFailure: (error: unknown) => void;
}

const OBJECT_EVENTS = new Set(['ADDED', 'MODIFIED', 'DELETED']);

/** Thrown into an informer when the API server refuses or breaks a watch. `statusCode` is the HTTP or Status code. */
export class WatchError extends Error {
  constructor(
    message: string,
    readonly statusCode?: number,
  ) {
    super(message);
    this.name = 'WatchError';
  }
}

const SHORT_WATCH_MS = 1000;
const DEADLINE_SLACK_MS = 30_000;
const MAX_ERROR_BODY = 64 * 1024;

/**
 * The watch transport of the informers, shaped like client-node's Watch so that its ListWatch drives it. It exists
 * because client-node's Watch has no timeout at all (its AbortSignal.timeout is overwritten), so a half-open
 * connection or a black-holed API server would leave an informer silently stale for ever; and because it calls `done`
 * with an error when its own caller aborts it, which would look like a watch failure to the watchdog.
 *
 * Differences, each for the watchdog's sake:
 * - the response headers must come within connectTimeoutMs, and a watch that outlives its server-side timeout by
 *   30 s is closed by the client (as client-go does) so the informer resumes from its resource version;
 * - bookmarks are requested, so that resuming rarely needs a relist;
 * - a non-200 answer carries the API server's Status message, not only the status line;
 * - an in-stream ERROR other than 410 Gone ends the watch with an error (client-node would reconnect at once, in a
 *   tight loop if the error persists); a 410 ends it normally after the ListWatch has noted it, so it relists;
 * - an abort by the ListWatch (stop, or the start of its next round) never calls `done`;
 * - `done` is always called after `watch()` has resolved, so the ListWatch records each request before its end;
 * - a watch that keeps ending right after it started, with no event, is resumed after a pause, not in a tight loop;
 * - an event the informer cannot read never reaches the ListWatch, whose handlers would throw on it (an object without
 *   metadata) or hand it to plugins: an unreadable object that has a name is delivered as a deletion, so the cache
 *   holds no stale version of it (a relist would not hold it either), and one without is delivered as a bookmark of
 *   its resourceVersion, so the watch resumes after it; malformed events are skipped;
 * - a failure of the ListWatch's (async) handlers is reported instead of becoming an unhandled rejection.
 */
export class HttpWatch {
  readonly config: KubeConfig;
  readonly #options: HttpWatchOptions;
  #consecutiveShortWatches = 0;

  constructor(config: KubeConfig, options: HttpWatchOptions) {
    this.config = config;
    this.#options = options;
  }

  async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: WatchEventCallback,
    done: WatchDone,
  ): Promise<AbortController> {
    const controller = new AbortController();
    if (!this.#options.beforeWatch()) {
      controller.abort();
      return controller;
    }
    const cluster = this.config.getCurrentCluster();
    if (!cluster) throw new Error('the Kubernetes client configuration has no current cluster');
    const url = new URL(cluster.server.replace(/\/+$/, '') + path);
    const timeoutSeconds = this.#options.timeoutSeconds();
    url.searchParams.set('watch', 'true');
    url.searchParams.set('allowWatchBookmarks', 'true');
    url.searchParams.set('timeoutSeconds', String(timeoutSeconds));
    for (const [key, value] of Object.entries(queryParams)) {
      if (value !== undefined && value !== '') url.searchParams.set(key, String(value));
    }

    let finished = false;
    let connectedAt: number | undefined;
    let events = 0;
    const timers: NodeJS.Timeout[] = [];
    const finish = (error: unknown): void => {
      if (finished) return;
      finished = true;
      for (const timer of timers) clearTimeout(timer);
      controller.abort();
      const short = error === null && connectedAt !== undefined && events === 0 && Date.now() - connectedAt < SHORT_WATCH_MS;
      this.#consecutiveShortWatches = short ? this.#consecutiveShortWatches + 1 : 0;
      const pause = this.#consecutiveShortWatches >= 2 ? Math.min(30_000, 500 * 2 ** this.#consecutiveShortWatches) : 0;
      if (pause > 0) timers.push(setTimeout(() => this.#settle(() => done(error)), pause));
      else setImmediate(() => this.#settle(() => done(error)));
    };
    // The ListWatch aborts a request when it stops or starts its next round: nothing to report then.
    controller.signal.addEventListener(
      'abort',
      () => {
        if (finished) return;
        finished = true;
        for (const timer of timers) clearTimeout(timer);
      },
      { once: true },
    );

    const requestOptions: https.RequestOptions & { headers?: Record<string, string> } = {};
    try {
      await this.config.applyToHTTPSOptions(requestOptions);
    } catch (error) {
      finish(error);
      return controller;
    }
    if (controller.signal.aborted) return controller;

    const transport = url.protocol === 'https:' ? https : http;
    const request = transport.request(url, {
      method: 'GET',
      headers: { ...requestOptions.headers, Accept: 'application/json' },
      ...(requestOptions.agent !== undefined && { agent: requestOptions.agent }),
      ...(requestOptions.auth !== undefined && { auth: requestOptions.auth }),
      signal: controller.signal,
    });
    timers.push(
      setTimeout(() => {
        if (connectedAt === undefined) {
          finish(new WatchError(`watch ${path}: no response within ${this.#options.connectTimeoutMs} ms`));
        }
      }, this.#options.connectTimeoutMs),
    );
    request.on('socket', (socket) => socket.setKeepAlive(true, 30_000));
    request.on('error', (error) => finish(error));
    request.on('response', (response) => {
      if (response.statusCode !== 200) {
        readErrorBody(response).then(
          (body) => {
            const error = watchResponseError(path, response.statusCode ?? 0, response.statusMessage, body);
            if (error.statusCode === 410) this.#options.onExpired(error.message);
            finish(error);
          },
          (error: unknown) => finish(error),
        );
        return;
      }
      connectedAt = Date.now();
      this.#options.onConnected();
      timers.push(setTimeout(() => finish(null), timeoutSeconds * 1000 + DEADLINE_SLACK_MS));
      const lines = createInterface({ input: response, crlfDelay: Infinity });
      lines.on('line', (line) => {
        if (finished || line.length === 0) return;
        let event: unknown;
        try {
          event = JSON.parse(line);
        } catch {
          finish(new WatchError(`watch ${path}: undecodable event: ${line.slice(0, 200)}`));
          return;
        }
        events++;
        if (!isPlainObject(event)) {
          this.#options.onMalformedEvent(`not a watch event: ${line.slice(0, 200)}`);
          return;
        }
        if (event.type === 'ERROR') {
          const status = (isPlainObject(event.object) ? event.object : {}) as { code?: unknown; message?: unknown; reason?: unknown };
          if (status.code === 410) {
            this.#options.onExpired(String(status.message ?? ''));
            this.#deliver(callback, 'ERROR', status, event, finish);
            finish(null);
          } else {
            const code = typeof status.code === 'number' ? status.code : undefined;
            finish(new WatchError(`watch ${path}: ${String(status.code ?? '')} ${String(status.reason ?? '')}: ${String(status.message ?? '')}`, code));
          }
          return;
        }
        if (event.type === 'BOOKMARK') {
          const resourceVersion = resourceVersionOf(event.object);
          if (resourceVersion === undefined) {
            this.#options.onMalformedEvent('a BOOKMARK event without a resourceVersion');
            return;
          }
          this.#deliver(callback, 'BOOKMARK', { metadata: { resourceVersion } }, event, finish);
          return;
        }
        if (typeof event.type !== 'string' || !OBJECT_EVENTS.has(event.type)) {
          this.#options.onMalformedEvent(`a watch event of unknown type ${JSON.stringify(event.type) ?? 'undefined'}`);
          return;
        }
        const read = this.#options.readObject(event.object, event.type);
        if (read.readable) {
          this.#deliver(callback, event.type, read.object, event, finish);
        } else if (read.identity) {
          const { name, namespace, resourceVersion } = read.identity;
          const stub = { metadata: { name, ...(namespace && { namespace }), ...(resourceVersion && { resourceVersion }) } };
          this.#deliver(callback, 'DELETED', stub, event, finish);
        } else {
          const resourceVersion = resourceVersionOf(event.object);
          if (resourceVersion !== undefined) this.#deliver(callback, 'BOOKMARK', { metadata: { resourceVersion } }, event, finish);
        }
      });
      // readline re-emits the response's errors; both must be handled or they crash the process.
      lines.on('error', (error) => finish(error));
      response.on('error', (error) => finish(error));
      response.on('close', () => finish(null));
    });
    request.end();
    return controller;
  }

  /** Hands one event to the ListWatch; its handler is async, so a failure may come as a rejected promise. */
  #deliver(callback: WatchEventCallback, phase: string, object: unknown, event: unknown, finish: (error: unknown) => void): void {
    try {
      const result = callback(phase, object, event);
      if (result instanceof Promise) result.catch((error: unknown) => finish(error));
    } catch (error) {
      finish(error);
    }
  }

  /** Runs the ListWatch's done handler (async: it lists and starts the next watch) and reports its failures. */
  #settle(call: () => void | Promise<void>): void {
    try {
      const result = call();
      if (result instanceof Promise) result.catch((error: unknown) => this.#options.onHandlerFailure(error));
    } catch (error) {
      this.#options.onHandlerFailure(error);
    }
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function resourceVersionOf(object: unknown): string | undefined {
  if (!isPlainObject(object) || !isPlainObject(object.metadata)) return undefined;
  const { resourceVersion } = object.metadata;
  return typeof resourceVersion === 'string' && resourceVersion !== '' ? resourceVersion : undefined;
}

function readErrorBody(response: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    response.on('data', (chunk: Buffer) => {
      if (size < MAX_ERROR_BODY) chunks.push(chunk);
      size += chunk.length;
    });
    response.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    response.on('error', reject);
  });
}

function watchResponseError(path: string, statusCode: number, statusMessage: string | undefined, body: string): WatchError {
  let message = statusMessage ?? '';
  try {
    const status = JSON.parse(body) as { message?: string; reason?: string };
    message = [status.reason, status.message].filter(Boolean).join(': ') || message;
  } catch {
    if (body.trim()) message = body.trim().slice(0, 300);
  }
  return new WatchError(`watch ${path}: HTTP ${statusCode}${message ? ` ${message}` : ''}`, statusCode);
}
