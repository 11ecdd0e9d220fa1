import { createHash } from 'node:crypto';

/** Long string lists (peer IPs) are shared between policies; each is hashed once instead of once per policy. */
const listHashes = new WeakMap<readonly unknown[], string>();
const LIST_HASH_THRESHOLD = 16;

/** A short, stable hash of a JSON-serialisable value (its key order included, which the compiler keeps fixed). */
export function fingerprintOf(value: unknown): string {
  return hash(JSON.stringify(value, replaceLongLists));
}

function replaceLongLists(_key: string, value: unknown): unknown {
  if (!Array.isArray(value) || value.length < LIST_HASH_THRESHOLD || typeof value[0] !== 'string') return value;
  let listHash = listHashes.get(value);
  if (listHash === undefined) {
    listHash = `#list ${hash(JSON.stringify(value))}`;
    listHashes.set(value, listHash);
  }
  return listHash;
}

function hash(text: string): string {
  return createHash('sha256').update(text).digest('base64url').slice(0, 22);
}
