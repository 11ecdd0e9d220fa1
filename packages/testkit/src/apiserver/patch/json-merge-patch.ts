import { isPlainObject } from '../kube-object.js';
import { ownValue, setOwn } from './own-properties.js';

/** RFC 7386 JSON merge patch: maps merge, null deletes, everything else (lists too) replaces. */
export function applyJsonMergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return structuredClone(patch);
  const result: Record<string, unknown> = isPlainObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else setOwn(result, key, applyJsonMergePatch(ownValue(result, key), value));
  }
  return result;
}
