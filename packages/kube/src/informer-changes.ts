import type { KubernetesObject } from '@kubernetes/client-node';
import { objectId } from './indexer.js';

/** The objects of one informer added, changed or deleted since the last take, each key once with its latest state. */
export interface InformerChanges<T> {
  /** The cache's current objects of the keys added or changed. */
  readonly upserted: readonly T[];
  /** The last object seen of each key now gone. */
  readonly deleted: readonly T[];
}

/**
 * Collects an informer's add, update and delete events between two syncs, so that a sync can read only what changed
 * instead of the whole cache. Beyond `limit` keys (a relist of a large cluster) it stops collecting and take()
 * answers undefined once: the consumer reads the full list that time, as it would without a tracker.
 */
export interface ChangeTracker<T> {
  /** What changed since the last take (or since the tracker was made); undefined when too much did. Starts over. */
  take(): InformerChanges<T> | undefined;
  /** Stops collecting. */
  close(): void;
}

/** Keys a tracker holds at most before it gives up collecting until the next take. */
export const DEFAULT_CHANGE_LIMIT = 4096;

export class InformerChangeTracker<T extends KubernetesObject> implements ChangeTracker<T> {
  readonly #limit: number;
  readonly #onClose: () => void;
  #changes = new Map<string, { object: T; deleted: boolean }>();
  #overflowed = false;

  constructor(onClose: () => void, limit = DEFAULT_CHANGE_LIMIT) {
    this.#onClose = onClose;
    this.#limit = limit;
  }

  /** Called by the informer for each event, after its cache has it. */
  record(object: T, deleted: boolean): void {
    if (this.#overflowed) return;
    this.#changes.set(objectId(object), { object, deleted });
    if (this.#changes.size > this.#limit) {
      this.#overflowed = true;
      this.#changes.clear();
    }
  }

  take(): InformerChanges<T> | undefined {
    const changes = this.#changes;
    const overflowed = this.#overflowed;
    this.#changes = new Map();
    this.#overflowed = false;
    if (overflowed) return undefined;
    const upserted: T[] = [];
    const deleted: T[] = [];
    for (const { object, deleted: gone } of changes.values()) (gone ? deleted : upserted).push(object);
    return { upserted, deleted };
  }

  close(): void {
    this.#changes.clear();
    this.#onClose();
  }
}
