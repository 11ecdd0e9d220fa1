import { badRequest } from '../errors.js';
import { isPlainObject } from '../kube-object.js';
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
    return value.filter((item) => !(isPlainObject(item) && item[patchDirective] !== undefined && Object.keys(item).length === 1)).map(withoutDirectives);
  }
  if (!isPlainObject(value)) return value;
  const clean: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (!key.startsWith('$')) clean[key] = withoutDirectives(item);
  }
  return clean;
}

function sameKey(a: Json, b: Json, mergeKey: string): boolean {
  return isPlainObject(a) && isPlainObject(b) && a[mergeKey] !== undefined && a[mergeKey] === b[mergeKey];
}

function mergeList(original: Json, patch: unknown[], path: string[], lookup: ListStrategyLookup): Json {
  const strategy = lookup(path);
  const replaceMarker = patch.findIndex((item) => isPlainObject(item) && item[patchDirective] === 'replace');
  if (!strategy || replaceMarker >= 0) return withoutDirectives(patch);
  const current = Array.isArray(original) ? [...original] : [];

  if ('mergePrimitives' in strategy) {
    for (const item of patch) if (!current.includes(item)) current.push(item);
    return current;
  }

  const { mergeKey } = strategy;
  for (const item of patch) {
    if (!isPlainObject(item)) {
      current.push(item);
      continue;
    }
    const index = current.findIndex((existing) => sameKey(existing, item, mergeKey));
    if (item[patchDirective] === 'delete') {
      if (index >= 0) current.splice(index, 1);
      continue;
    }
    const merged = mergeMap(index >= 0 ? current[index] : {}, item, path, lookup);
    if (index >= 0) {
      if (merged === deleted) current.splice(index, 1);
      else current[index] = merged;
    } else if (merged !== deleted) {
      current.push(merged);
    }
  }
  return current;
}

function applyElementOrder(list: Json, order: unknown, strategy: ListStrategy | undefined): Json {
  if (!Array.isArray(list) || !Array.isArray(order)) return list;
  const position = (item: Json): number =>
    order.findIndex((entry) =>
      strategy && 'mergeKey' in strategy ? sameKey(entry, item, strategy.mergeKey) : entry === item,
    );
  const ordered = order.flatMap((_, index) => list.filter((item) => position(item) === index));
  const unordered = list.filter((item) => position(item) < 0);
  return [...ordered, ...unordered];
}

function mergeMap(original: Json, patch: Record<string, unknown>, path: string[], lookup: ListStrategyLookup): Json | typeof deleted {
  const directive = patch[patchDirective];
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
        if (result[field] !== undefined) result[field] = applyElementOrder(result[field], value, lookup([...path, field]));
      });
      continue;
    }
    if (key.startsWith(deleteFromPrimitiveListPrefix)) {
      const field = key.slice(deleteFromPrimitiveListPrefix.length);
      afterMerge.push(() => {
        const list = result[field];
        if (Array.isArray(list) && Array.isArray(value)) result[field] = list.filter((item) => !value.includes(item));
      });
      continue;
    }
    if (key.startsWith('$')) throw badRequest(`unknown patch directive "${key}"`);

    const childPath = [...path, key];
    if (value === null) {
      delete result[key];
    } else if (isPlainObject(value)) {
      const merged = mergeMap(result[key], value, childPath, lookup);
      if (merged === deleted) delete result[key];
      else result[key] = merged;
    } else if (Array.isArray(value)) {
      result[key] = mergeList(result[key], value, childPath, lookup);
    } else {
      result[key] = value;
    }
  }
  for (const step of afterMerge) step();

  const retainKeys = patch[retainKeysDirective];
  if (Array.isArray(retainKeys)) {
    for (const key of Object.keys(result)) if (!retainKeys.includes(key)) delete result[key];
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
