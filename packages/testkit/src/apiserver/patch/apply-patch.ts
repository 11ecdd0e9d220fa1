import { ApiError, badRequest } from '../errors.js';
import type { KubeObject } from '../kube-object.js';
import { isPlainObject } from '../kube-object.js';
import { applyJsonMergePatch } from './json-merge-patch.js';
import { applyJsonPatch } from './json-patch.js';
import { findPrototypeKey } from './own-properties.js';
import { listStrategyFor } from './strategic-merge-keys.js';
import { applyStrategicMergePatch } from './strategic-merge-patch.js';

export type PatchType = 'json' | 'merge' | 'strategic';

const patchTypesByContentType: Record<string, PatchType> = {
  'application/json-patch+json': 'json',
  'application/merge-patch+json': 'merge',
  'application/strategic-merge-patch+json': 'strategic',
};

export const supportedPatchContentTypes = Object.keys(patchTypesByContentType);

export function patchTypeForContentType(contentType: string | undefined): PatchType {
  const mediaType = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  if (Object.hasOwn(patchTypesByContentType, mediaType)) return patchTypesByContentType[mediaType] as PatchType;
  if (mediaType === 'application/apply-patch+yaml') {
    throw new ApiError(415, 'UnsupportedMediaType', 'server-side apply is not supported by the embedded API server; use client-side kubectl apply');
  }
  throw new ApiError(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: ${supportedPatchContentTypes.join(', ')}`);
}

/** The object that results from applying a patch of the given type to `current`. */
export function applyPatch(current: KubeObject, type: PatchType, patch: unknown): KubeObject {
  refusePrototypeKey(patch);
  let result: unknown;
  switch (type) {
    case 'json':
      result = applyJsonPatch(current, patch);
      break;
    case 'merge':
      if (!isPlainObject(patch)) throw badRequest('a merge patch must be a JSON object');
      result = applyJsonMergePatch(current, patch);
      break;
    case 'strategic':
      result = applyStrategicMergePatch(current, patch, (path) => listStrategyFor(current.kind, path));
      break;
  }
  if (!isPlainObject(result) || !isPlainObject(result.metadata)) {
    throw new ApiError(422, 'Invalid', 'the patch must leave an object with metadata');
  }
  return result as KubeObject;
}

/**
 * A `__proto__` key is no field of any Kubernetes object; kube-apiserver's strict decoding calls such a field
 * unknown. Refused for every patch type, before a patch walks the object along it.
 */
function refusePrototypeKey(patch: unknown): void {
  const field = findPrototypeKey(patch);
  if (field !== undefined) throw badRequest(`the patch could not be decoded: strict decoding error: unknown field "${field}"`);
}
