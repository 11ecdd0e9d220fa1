/** The most keys a chunk holds before it splits in two; a few hundred keeps both the splice and the chunk count small. */
const DEFAULT_MAX_CHUNK = 512;

/** The first index in `sorted` whose key is >= `key` (or > `key` when `after`). */
function bound(sorted: readonly string[], key: string, after: boolean): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const probe = sorted[mid] as string;
    if (probe < key || (after && probe === key)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * A set of strings kept in order as it changes (code-unit order, which is etcd's byte order for the ASCII keys
 * Kubernetes names are made of): sorted chunks of at most a few hundred keys, so an insert or a delete moves at most a
 * chunk's worth of keys and a walk from any key starts with two binary searches. This is what lets a list page cost
 * what the page costs instead of a sort of the whole collection.
 */
export class SortedKeys {
  private readonly chunks: string[][] = [];
  private count = 0;

  /** `maxChunk` is there for tests, which make chunks split and empty with a few keys. */
  constructor(private readonly maxChunk = DEFAULT_MAX_CHUNK) {}

  get size(): number {
    return this.count;
  }

  /** Adds `key`; false when it was already there. */
  add(key: string): boolean {
    if (this.chunks.length === 0) {
      this.chunks.push([key]);
      this.count = 1;
      return true;
    }
    const c = this.chunkFor(key);
    const chunk = this.chunks[c] as string[];
    const i = bound(chunk, key, false);
    if (chunk[i] === key) return false;
    chunk.splice(i, 0, key);
    this.count++;
    if (chunk.length > this.maxChunk) this.chunks.splice(c + 1, 0, chunk.splice(chunk.length >>> 1));
    return true;
  }

  /** Removes `key`; false when it was not there. */
  delete(key: string): boolean {
    if (this.chunks.length === 0) return false;
    const c = this.chunkFor(key);
    const chunk = this.chunks[c] as string[];
    const i = bound(chunk, key, false);
    if (chunk[i] !== key) return false;
    chunk.splice(i, 1);
    this.count--;
    if (chunk.length === 0) this.chunks.splice(c, 1);
    return true;
  }

  /**
   * The keys from `lower` on (after it when `exclusive`), in order; every key without `lower`. Not live: do not add or
   * delete keys while walking.
   */
  *from(lower?: string, exclusive = false): Generator<string, void, undefined> {
    if (this.chunks.length === 0) return;
    let c = lower === undefined ? 0 : this.chunkFor(lower);
    let i = lower === undefined ? 0 : bound(this.chunks[c] as string[], lower, exclusive);
    for (; c < this.chunks.length; c++, i = 0) {
      const chunk = this.chunks[c] as string[];
      for (; i < chunk.length; i++) yield chunk[i] as string;
    }
  }

  /** How many keys sort before `key` (before or equal to it when `inclusive`). */
  countBefore(key: string, inclusive = false): number {
    let counted = 0;
    for (const chunk of this.chunks) {
      if ((chunk[chunk.length - 1] as string) < key || (inclusive && chunk[chunk.length - 1] === key)) {
        counted += chunk.length;
        continue;
      }
      return counted + bound(chunk, key, inclusive);
    }
    return counted;
  }

  /** The chunk that holds `key` or would: the first whose last key is >= `key`, else the last chunk. */
  private chunkFor(key: string): number {
    let lo = 0;
    let hi = this.chunks.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const chunk = this.chunks[mid] as string[];
      if ((chunk[chunk.length - 1] as string) < key) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
