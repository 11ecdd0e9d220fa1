import { badRequest } from '../errors.js';
import { isPlainObject } from '../kube-object.js';
import { ownValue, setOwn } from './own-properties.js';
import type { ListStrategy } from './strategic-merge-keys.js';

export type ListStrategyLookup = (path: readonly string[]) => ListStrategy | undefined;

const patchDirective = '$patch';
const retainKeysDirective = '$retainKeys';
const setElementOrderPrefix = '$setElementOrder/';
const deleteFromPrimitiveListPrefix = '$deleteFromPrimitiveList/';

/** Marks a map that a `$patch: delete` directive removes from its parent. */
const deleted = Symbol('deleted');

type Json = unknown;

function withoutDirectives(value: Json): Json {
  if (Array.isArray(value)) {
    return value.filter((item) => !(isPlainObject(item) && ownValue(item, patchDirective) !== undefined && Object.keys(item).length === 1)).map(withoutDirectives);
  }
  if (!isPlainObject(value)) return value;
  const clean: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (!key.startsWith('$')) setOwn(clean, key, withoutDirectives(item));
  }
  return clean;
}

/** The merge key's value of a list item, or undefined for an item that cannot be matched by key. */
function keyOf(item: Json, mergeKey: string): unknown {
  return isPlainObject(item) ? ownValue(item, mergeKey) : undefined;
}

/**
 * The positions of a merged list's items by merge key, first occurrence first, so that each patch item finds its
 * match without a scan (a scan per item made a 40,000-item patch quadratic).
 */
class KeyIndex {
  readonly #positions = new Map<unknown, number[]>();

  add(key: unknown, position: number): void {
    if (key === undefined) return;
    const positions = this.#positions.get(key);
    if (positions) positions.push(position);
    else this.#positions.set(key, [position]);
  }

  first(key: unknown): number {
    return key === undefined ? -1 : (this.#positions.get(key)?.[0] ?? -1);
  }

  removeFirst(key: unknown): void {
    this.#positions.get(key)?.shift();
  }
}

function mergeList(original: Json, patch: unknown[], path: string[], lookup: ListStrategyLookup): Json {
  const strategy = lookup(path);
  const replaceMarker = patch.findIndex((item) => isPlainObject(item) && ownValue(item, patchDirective) === 'replace');
  if (!strategy || replaceMarker >= 0) return withoutDirectives(patch);
  const current = Array.isArray(original) ? [...original] : [];

  if ('mergePrimitives' in strategy) {
    const present = new Set(current);
    for (const item of patch) {
      if (present.has(item)) continue;
      present.add(item);
      current.push(item);
    }
    return current;
  }

  // Removed items leave a hole until the end, so that the index's positions stay valid.
  const { mergeKey } = strategy;
  const slots: (Json | typeof deleted)[] = current;
  const index = new KeyIndex();
  current.forEach((item, position) => index.add(keyOf(item, mergeKey), position));
  for (const item of patch) {
    if (!isPlainObject(item)) {
      slots.push(item);
      continue;
    }
    const key = keyOf(item, mergeKey);
    const position = index.first(key);
    if (ownValue(item, patchDirective) === 'delete') {
      if (position >= 0) {
        slots[position] = deleted;
        index.removeFirst(key);
      }
      continue;
    }
    const merged = mergeMap(position >= 0 ? slots[position] : {}, item, path, lookup);
    if (position >= 0) {
      slots[position] = merged;
      if (merged === deleted) index.removeFirst(key);
    } else if (merged !== deleted) {
      index.add(keyOf(merged, mergeKey), slots.length);
      slots.push(merged);
    }
  }
  return slots.filter((item) => item !== deleted);
}

/**
 * Orders a merged list as `$setElementOrder` says: items named in the order first, in its order, then the rest as
 * they were. Items are matched by merge key, or by value in a list of primitives.
 */
function applyElementOrder(list: Json, order: unknown, strategy: ListStrategy | undefined): Json {
  if (!Array.isArray(list) || !Array.isArray(order)) return list;
  const byKey = strategy && 'mergeKey' in strategy ? strategy.mergeKey : undefined;
  const identity = (item: Json): unknown => (byKey === undefined ? item : keyOf(item, byKey));
  const rank = new Map<unknown, number>();
  order.forEach((entry, position) => {
    const key = identity(entry);
    if (key !== undefined && !rank.has(key)) rank.set(key, position);
  });
  const ranked = list.map((item, position) => ({ item, position, rank: rank.get(identity(item)) }));
  const ordered = ranked.filter((entry) => entry.rank !== undefined).sort((a, b) => (a.rank as number) - (b.rank as number) || a.position - b.position);
  const unordered = ranked.filter((entry) => entry.rank === undefined);
  return [...ordered, ...unordered].map((entry) => entry.item);
}

function mergeMap(original: Json, patch: Record<string, unknown>, path: string[], lookup: ListStrategyLookup): Json | typeof deleted {
  const directive = ownValue(patch, patchDirective);
  if (directive === 'delete') return deleted;
  if (directive === 'replace') return withoutDirectives(patch);
  if (directive !== undefined && directive !== 'merge') throw badRequest(`unknown patch directive "${String(directive)}"`);

  const result: Record<string, unknown> = isPlainObject(original) ? { ...original } : {};
  const afterMerge: (() => void)[] = [];

  for (const [key, value] of Object.entries(patch)) {
    if (key === patchDirective || key === retainKeysDirective) continue;
    if (key.startsWith(setElementOrderPrefix)) {
      const field = key.slice(setElementOrderPrefix.length);
      afterMerge.push(() => {
        const list = ownValue(result, field);
        if (list !== undefined) setOwn(result, field, applyElementOrder(list, value, lookup([...path, field])));
      });
      continue;
    }
    if (key.startsWith(deleteFromPrimitiveListPrefix)) {
      const field = key.slice(deleteFromPrimitiveListPrefix.length);
      afterMerge.push(() => {
        const list = ownValue(result, field);
        if (!Array.isArray(list) || !Array.isArray(value)) return;
        const removed = new Set(value);
        setOwn(result, field, list.filter((item) => !removed.has(item)));
      });
      continue;
    }
    if (key.startsWith('$')) throw badRequest(`unknown patch directive "${key}"`);

    const childPath = [...path, key];
    if (value === null) {
      delete result[key];
    } else if (isPlainObject(value)) {
      const merged = mergeMap(ownValue(result, key), value, childPath, lookup);
      if (merged === deleted) delete result[key];
      else setOwn(result, key, merged);
    } else if (Array.isArray(value)) {
      setOwn(result, key, mergeList(ownValue(result, key), value, childPath, lookup));
    } else {
      setOwn(result, key, value);
    }
  }
  for (const step of afterMerge) step();

  const retainKeys = ownValue(patch, retainKeysDirective);
  if (Array.isArray(retainKeys)) {
    const retained = new Set(retainKeys);
    for (const key of Object.keys(result)) if (!retained.has(key)) delete result[key];
  }
  return result;
}

/**
 * Applies a strategic merge patch: maps merge, null deletes, lists replace unless the field has a merge
 * strategy, and the `$patch`, `$retainKeys`, `$setElementOrder/…` and `$deleteFromPrimitiveList/…`
 * directives that kubectl sends are honoured.
 */
export function applyStrategicMergePatch(original: Json, patch: unknown, lookup: ListStrategyLookup): Json {
  if (!isPlainObject(patch)) throw badRequest('a strategic merge patch must be a JSON object');
  const merged = mergeMap(structuredClone(original), patch, [], lookup);
  if (merged === deleted) throw badRequest('a strategic merge patch cannot delete the whole object');
  return merged;
}
