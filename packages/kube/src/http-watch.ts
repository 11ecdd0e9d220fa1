import http from 'node:http';
import https from 'node:https';
import { createInterface } from 'node:readline';
import type { KubeConfig } from '@kubernetes/client-node';

export type WatchEventCallback = (phase: string, object: unknown, event?: unknown) => void;
export type WatchDone = (error: unknown) => void;

export interface HttpWatchOptions {
  /** Time allowed for the API server to answer a watch request with its headers. */
  connectTimeoutMs: number;
  /** Server-side duration of one watch request, in seconds; the informer then resumes from its resource version. */
  timeoutSeconds: () => number;
  /** Called before each watch request; a false answer (the informer was stopped meanwhile) cancels it. */
  beforeWatch: () => boolean;
  /** The API server accepted the watch. */
  onConnected: () => void;
  /** Turns a watched object into the shape of a listed one. */
  deserialize: (object: unknown) => unknown;
}

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
 * - a watch that keeps ending right after it started, with no event, is resumed after a pause, not in a tight loop.
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
      if (pause > 0) timers.push(setTimeout(() => done(error), pause));
      else setImmediate(() => done(error));
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
          (body) => finish(watchResponseError(path, response.statusCode ?? 0, response.statusMessage, body)),
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
        let event: { type?: string; object?: unknown };
        try {
          event = JSON.parse(line) as { type?: string; object?: unknown };
        } catch {
          finish(new WatchError(`watch ${path}: undecodable event: ${line.slice(0, 200)}`));
          return;
        }
        events++;
        if (event.type === 'ERROR') {
          const status = (event.object ?? {}) as { code?: number; message?: string; reason?: string };
          if (status.code === 410) {
            callback('ERROR', status, event);
            finish(null);
          } else {
            finish(new WatchError(`watch ${path}: ${status.code ?? ''} ${status.reason ?? ''}: ${status.message ?? ''}`, status.code));
          }
          return;
        }
        const object = event.type === 'BOOKMARK' ? event.object : this.#options.deserialize(event.object);
        try {
          callback(event.type ?? '', object, event);
        } catch (error) {
          finish(error);
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
