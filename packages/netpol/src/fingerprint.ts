import { hash as digest } from 'node:crypto';

/** Long string lists (peer IPs) are shared between policies; each is hashed once instead of once per policy. */
const listHashes = new WeakMap<readonly unknown[], string>();
const LIST_HASH_THRESHOLD = 16;

/** A short, stable hash of a JSON-serialisable value (its key order included, which the compiler keeps fixed). */
export function fingerprintOf(value: unknown): string {
  return hash(JSON.stringify(withListHashes(value)));
}

/**
 * Gives `target` a `fingerprint` of `content()`, worked out when first read and then kept. A full compile of a large
 * cluster makes thousands of compiled objects whose fingerprints nothing reads until a later compile makes a new
 * object for the same policy and the two must be compared; hashing each one up front cost a sixth of that compile.
 * `content` must not read the fingerprint itself, and what it returns must not change.
 */
export function defineFingerprint<T extends object>(target: T, content: () => unknown): T & { readonly fingerprint: string } {
  let fingerprint: string | undefined;
  return Object.defineProperty(target, 'fingerprint', {
    enumerable: true,
    get: () => (fingerprint ??= fingerprintOf(content())),
  }) as T & { readonly fingerprint: string };
}

/**
 * The value with each long list of strings replaced by its hash, copying only the objects on the way to one. Then
 * JSON.stringify runs without a replacer, on its fast path: a replacer is called back for every value, and was the
 * largest single cost of compiling a thousand policies.
 */
function withListHashes(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    if (value.length >= LIST_HASH_THRESHOLD && typeof value[0] === 'string') return listHash(value);
    let copy: unknown[] | undefined;
    for (let index = 0; index < value.length; index++) {
      const item: unknown = value[index];
      const replaced = withListHashes(item);
      if (replaced !== item) (copy ??= value.slice())[index] = replaced;
    }
    return copy ?? value;
  }
  let copy: Record<string, unknown> | undefined;
  for (const key of Object.keys(value)) {
    const field = (value as Record<string, unknown>)[key];
    const replaced = withListHashes(field);
    if (replaced !== field) (copy ??= { ...value })[key] = replaced;
  }
  return copy ?? value;
}

function listHash(list: readonly unknown[]): string {
  let listHash = listHashes.get(list);
  if (listHash === undefined) {
    listHash = `#list ${hash(JSON.stringify(list))}`;
    listHashes.set(list, listHash);
  }
  return listHash;
}

function hash(text: string): string {
  return digest('sha256', text, 'base64url').slice(0, 22);
}
