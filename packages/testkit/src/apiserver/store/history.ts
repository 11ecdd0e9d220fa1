import type { KubeObject } from '../kube-object.js';

export interface StoreEvent {
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED';
  readonly resourceVersion: number;
  /** The storage key of the resource (see storageKey). */
  readonly key: string;
  /** The object as stored (storage form); never mutated after it was recorded. */
  readonly object: KubeObject;
  /**
   * The object before a modification, so that watches with selectors can see objects enter and leave; before a
   * deletion, the last version, so that a continued list can serve the collection as it was before it.
   */
  readonly previous?: KubeObject;
}

/**
 * The bounded window of recent changes that lets a watch resume from a resourceVersion, like etcd's
 * history before compaction. A resume point older than the window is expired.
 */
export class EventHistory {
  private readonly events: StoreEvent[] = [];
  /** Every change after this resourceVersion is still in the window. */
  private oldestResumable = 0;

  constructor(private readonly limit: number) {}

  append(event: StoreEvent): void {
    this.events.push(event);
    while (this.events.length > this.limit) {
      const dropped = this.events.shift() as StoreEvent;
      this.oldestResumable = dropped.resourceVersion;
    }
  }

  /** The changes after `resourceVersion`, or undefined when some of them have left the window. */
  since(resourceVersion: number): readonly StoreEvent[] | undefined {
    if (resourceVersion < this.oldestResumable) return undefined;
    // Events are in resourceVersion order: find the first later one instead of testing every event.
    let lo = 0;
    let hi = this.events.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.events[mid] as StoreEvent).resourceVersion <= resourceVersion) lo = mid + 1;
      else hi = mid;
    }
    return this.events.slice(lo);
  }

  get oldestResourceVersion(): number {
    return this.oldestResumable;
  }

  /** Forgets every change up to `resourceVersion`, as an etcd compaction does. */
  compact(resourceVersion: number): void {
    this.oldestResumable = Math.max(this.oldestResumable, resourceVersion);
    while (this.events.length > 0 && (this.events[0] as StoreEvent).resourceVersion <= resourceVersion) {
      this.events.shift();
    }
  }
}
