import type { KubeObject } from '../kube-object.js';
import { SortedKeys } from './sorted-keys.js';

/** The stored objects of one resource by `namespace/name`, with the keys kept in order as objects come and go. */
export class OrderedObjects {
  private readonly byKey = new Map<string, KubeObject>();
  readonly keys = new SortedKeys();

  get size(): number {
    return this.byKey.size;
  }

  get(key: string): KubeObject | undefined {
    return this.byKey.get(key);
  }

  has(key: string): boolean {
    return this.byKey.has(key);
  }

  set(key: string, obj: KubeObject): void {
    if (!this.byKey.has(key)) this.keys.add(key);
    this.byKey.set(key, obj);
  }

  delete(key: string): void {
    if (this.byKey.delete(key)) this.keys.delete(key);
  }

  /** Every object, in no particular order. */
  values(): IterableIterator<KubeObject> {
    return this.byKey.values();
  }
}
