import type { StatusCause } from '../errors.js';
import type { ResourceType } from '../resources.js';

const dns1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

// Namespaces and Services become DNS labels, so their names must be labels; the rest are subdomains.
const labelNamedKinds = new Set(['Namespace', 'Service']);

export function validateName(resource: ResourceType, name: string | undefined): StatusCause[] {
  if (!name) {
    return [{ reason: 'FieldValueRequired', field: 'metadata.name', message: 'Required value: name or generateName is required' }];
  }
  // RBAC objects are named as path segments (ValidateRBACName), so that system:discovery is a name.
  if (resource.group === 'rbac.authorization.k8s.io') {
    if (name !== '.' && name !== '..' && !/[/%]/.test(name)) return [];
    const rule = name === '.' || name === '..' ? `may not be '${name}'` : `may not contain '${name.includes('/') ? '/' : '%'}'`;
    return [{ reason: 'FieldValueInvalid', field: 'metadata.name', message: `Invalid value: "${name}": ${rule}` }];
  }
  const asLabel = labelNamedKinds.has(resource.kind);
  const pattern = asLabel ? dns1123Label : dns1123Subdomain;
  const maxLength = asLabel ? 63 : 253;
  if (resource.kind === 'Event' ? name.length > maxLength : !pattern.test(name) || name.length > maxLength) {
    const rule = asLabel ? 'a lowercase RFC 1123 label' : 'a lowercase RFC 1123 subdomain';
    return [{ reason: 'FieldValueInvalid', field: 'metadata.name', message: `Invalid value: "${name}": must be ${rule}` }];
  }
  return [];
}

/** kube-apiserver's TotalAnnotationSizeLimitB: what all of an object's annotation keys and values may sum to. */
export const totalAnnotationSizeLimitBytes = 256 * 1024;

function annotationBytes(annotations: object): number {
  let total = 0;
  for (const [key, value] of Object.entries(annotations)) {
    total += Buffer.byteLength(key, 'utf8') + (typeof value === 'string' ? Buffer.byteLength(value, 'utf8') : 0);
  }
  return total;
}

export function validateMetadataMaps(metadata: Record<string, unknown>): StatusCause[] {
  const causes: StatusCause[] = [];
  for (const field of ['labels', 'annotations']) {
    const map = metadata[field];
    if (map === undefined || map === null) continue;
    if (typeof map !== 'object' || Array.isArray(map)) {
      causes.push({ reason: 'FieldValueInvalid', field: `metadata.${field}`, message: 'Invalid value: must be a map' });
      continue;
    }
    for (const [key, value] of Object.entries(map)) {
      if (typeof value !== 'string') {
        causes.push({
          reason: 'FieldValueInvalid',
          field: `metadata.${field}.${key}`,
          message: 'Invalid value: must be a string',
        });
      }
    }
    if (field === 'annotations' && annotationBytes(map) > totalAnnotationSizeLimitBytes) {
      causes.push({
        reason: 'FieldValueTooLong',
        field: 'metadata.annotations',
        message: `Too long: must have at most ${totalAnnotationSizeLimitBytes} bytes`,
      });
    }
  }
  return causes;
}
