import type { KubernetesObject } from '@kubernetes/client-node';

/** The keys an object files under in one index; none leaves it out of that index. */
export type IndexFunction<T> = (object: T) => readonly string[];

/**
 * Secondary indexes over an informer's cache, kept up to date from its add, update and delete callbacks. The
 * informer's own cache already answers get by namespace/name and list by namespace.
 */
export class Indexer<T extends KubernetesObject> {
  readonly #names: string[];
  readonly #functions: IndexFunction<T>[];
  readonly #indexes: Map<string, Map<string, T>>[];
  /**
   * The keys each object was filed under, per index in declaration order, to unfile it on update and delete (the
   * informer's callbacks do not pass the old object).
   */
  readonly #filed = new Map<string, (readonly string[])[]>();

  constructor(functions: Record<string, IndexFunction<T>> = {}) {
    this.#names = Object.keys(functions);
    this.#functions = Object.values(functions);
    this.#indexes = this.#names.map(() => new Map());
  }

  get size(): number {
    return this.#filed.size;
  }

  upsert(object: T): void {
    const id = objectId(object);
    this.#unfile(id);
    const filed = this.#functions.map((fn) => fn(object));
    for (const [position, keys] of filed.entries()) {
      const index = this.#indexes[position]!;
      for (const key of keys) {
        let bucket = index.get(key);
        if (!bucket) index.set(key, (bucket = new Map()));
        bucket.set(id, object);
      }
    }
    this.#filed.set(id, filed);
  }

  remove(object: T): void {
    this.#unfile(objectId(object));
  }

  byIndex(name: string, key: string): T[] {
    const index = this.#indexes[this.#names.indexOf(name)];
    if (!index) throw new Error(`no index ${name}`);
    const bucket = index.get(key);
    return bucket ? [...bucket.values()] : [];
  }

  #unfile(id: string): void {
    const filed = this.#filed.get(id);
    if (!filed) return;
    for (const [position, keys] of filed.entries()) {
      const index = this.#indexes[position]!;
      for (const key of keys) {
        const bucket = index.get(key);
        if (!bucket) continue;
        bucket.delete(id);
        if (bucket.size === 0) index.delete(key);
      }
    }
    this.#filed.delete(id);
  }
}

export function objectId(object: KubernetesObject): string {
  const namespace = object.metadata?.namespace;
  const name = object.metadata?.name ?? '';
  return namespace ? `${namespace}/${name}` : name;
}
