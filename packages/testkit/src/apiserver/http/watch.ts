import type { ServerResponse } from 'node:http';
import { badRequest, expired } from '../errors.js';
import type { Status } from '../errors.js';
import type { KubeObject, WatchEventType } from '../kube-object.js';
import type { ResourceType } from '../resources.js';
import { storageKey } from '../resources.js';
import type { StoreEvent } from '../store/history.js';
import type { ObjectStore, Selectors } from '../store/object-store.js';
import type { TableVersion } from './negotiation.js';
import type { IncludeObject } from './table.js';
import { toTable } from './table.js';

export interface WatchParameters {
  resource: ResourceType;
  namespace: string | undefined;
  selectors: Selectors;
  /** From parseWatchRevision: undefined means "current state first, then changes". */
  fromRevision: number | undefined;
  allowWatchBookmarks: boolean;
  sendInitialEvents: boolean | undefined;
  timeoutSeconds: number | undefined;
  /** Render each event's object as a one-row Table (kubectl get --watch). */
  table: TableVersion | undefined;
  includeObject: IncludeObject;
}

interface OpenWatch {
  resource: ResourceType;
  end(): void;
  writeLine(line: string): void;
}

/** Parses a watch's resourceVersion: undefined means "current state first, then changes". */
export function parseWatchRevision(resourceVersion: string | undefined): number | undefined {
  if (resourceVersion === undefined || resourceVersion === '' || resourceVersion === '0') return undefined;
  if (!/^\d+$/.test(resourceVersion)) throw badRequest(`invalid resource version: ${resourceVersion}`);
  return Number(resourceVersion);
}

/**
 * The open watch streams: each is a chunked HTTP response of newline-delimited watch events fed by the
 * store, resumable from the store's history, with periodic bookmarks when the client allows them.
 */
export class WatchStreams {
  private readonly open = new Set<OpenWatch>();

  constructor(
    private readonly store: ObjectStore,
    private readonly bookmarkIntervalMs: number,
  ) {}

  count(resource?: string): number {
    return [...this.open].filter((watch) => resource === undefined || watch.resource.plural === resource).length;
  }

  /** Ends matching streams; clients see a normal end of stream and re-watch. */
  close(resource?: string): number {
    let closed = 0;
    for (const watch of [...this.open]) {
      if (resource !== undefined && watch.resource.plural !== resource) continue;
      watch.end();
      closed++;
    }
    return closed;
  }

  /** Writes a raw line to the open streams on one resource (fault injection); returns how many got it. */
  writeLine(resource: string, line: string): number {
    let written = 0;
    for (const watch of this.open) {
      if (watch.resource.plural !== resource) continue;
      watch.writeLine(line);
      written++;
    }
    return written;
  }

  start(response: ServerResponse, params: WatchParameters): void {
    const { fromRevision } = params;
    const { resource, store } = { resource: params.resource, store: this.store };
    const key = storageKey(resource);
    const present = (obj: KubeObject): KubeObject =>
      resource.storage ? resource.storage.fromStorage(structuredClone(obj)) : obj;
    const inScope = (obj: KubeObject): boolean =>
      params.namespace === undefined || obj.metadata.namespace === params.namespace;
    const selected = (obj: KubeObject): boolean => inScope(obj) && store.matches(obj, params.selectors);

    response.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' });
    // Clients (fetch, client-go) wait for the headers before they consider the watch established.
    response.flushHeaders();
    const write = (type: WatchEventType, object: KubeObject | Status): void => {
      if (response.writableEnded) return;
      const rendered = params.table && type !== 'ERROR' && type !== 'BOOKMARK'
        ? toTable(resource, [object as KubeObject], (object as KubeObject).metadata.resourceVersion ?? '', params.table, params.includeObject)
        : object;
      response.write(`${JSON.stringify({ type, object: rendered })}\n`);
    };

    // Translates one store change into what this watch sees: with selectors, an object that starts or
    // stops matching is ADDED or DELETED, as a real API server's watch cache reports it.
    const deliver = (event: StoreEvent): void => {
      if (event.key !== key) return;
      const object = present(event.object);
      const now = selected(object);
      if (event.type === 'MODIFIED' && event.previous) {
        const before = selected(present(event.previous));
        if (before && now) write('MODIFIED', object);
        else if (now) write('ADDED', object);
        else if (before) write('DELETED', object);
      } else if (now) {
        write(event.type, object);
      }
    };

    let unsubscribe = (): void => {};
    const timers: NodeJS.Timeout[] = [];
    const watch: OpenWatch = {
      resource,
      end: () => {
        if (!this.open.delete(watch)) return;
        unsubscribe();
        for (const timer of timers) clearTimeout(timer);
        response.end();
      },
      writeLine: (line) => {
        if (!response.writableEnded) response.write(`${line}\n`);
      },
    };
    this.open.add(watch);
    response.on('close', watch.end);

    if (fromRevision !== undefined && params.sendInitialEvents !== true) {
      const changes = store.changesSince(fromRevision);
      if (!changes) {
        const error = expired(`too old resource version: ${fromRevision} (${store.oldestResumableResourceVersion + 1})`);
        write('ERROR', error.toStatus());
        watch.end();
        return;
      }
      for (const change of changes) deliver(change);
    } else {
      for (const obj of store.list(resource, params.namespace, params.selectors)) write('ADDED', obj);
      if (params.sendInitialEvents === true) {
        write('BOOKMARK', this.bookmark(resource, { 'k8s.io/initial-events-end': 'true' }));
      }
    }
    unsubscribe = store.subscribe(deliver);

    if (params.allowWatchBookmarks) {
      timers.push(setInterval(() => write('BOOKMARK', this.bookmark(resource)), this.bookmarkIntervalMs));
    }
    if (params.timeoutSeconds !== undefined && params.timeoutSeconds > 0) {
      timers.push(setTimeout(watch.end, params.timeoutSeconds * 1000));
    }
  }

  private bookmark(resource: ResourceType, annotations?: Record<string, string>): KubeObject {
    return {
      kind: resource.kind,
      apiVersion: resource.apiVersion,
      metadata: { resourceVersion: String(this.store.resourceVersion), ...(annotations ? { annotations } : {}) },
    };
  }
}
