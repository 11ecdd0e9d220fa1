import { badRequest } from '../errors.js';
import type { KubeObject } from '../kube-object.js';
import { isPlainObject } from '../kube-object.js';
import type { ResourceType } from '../resources.js';

export interface FieldRequirement {
  field: string;
  operator: 'equals' | 'notEquals';
  value: string;
}

export type FieldSelector = readonly FieldRequirement[];

// Splits on an unescaped separator; field selector values escape `\`, `,` and `=` with a backslash.
function splitUnescaped(input: string, separator: string): string[] {
  const parts: string[] = [];
  let current = '';
  for (let i = 0; i < input.length; i++) {
    const ch = input[i] as string;
    if (ch === '\\' && i + 1 < input.length) {
      current += ch + (input[i + 1] as string);
      i++;
    } else if (ch === separator) {
      parts.push(current);
      current = '';
    } else {
      current += ch;
    }
  }
  parts.push(current);
  return parts;
}

function unescape(value: string): string {
  return value.replace(/\\(.)/g, '$1');
}

/** Parses a field selector and rejects fields the resource does not index, as a real API server does. */
export function parseFieldSelector(selector: string | undefined, resource: ResourceType): FieldSelector {
  if (!selector || selector.trim() === '') return [];
  const allowed = new Set(['metadata.name', 'metadata.namespace', ...resource.selectableFields]);
  return splitUnescaped(selector, ',').map((term) => {
    const match = /^([^=!]+?)\s*(==|=|!=)\s*(.*)$/s.exec(term.trim());
    if (!match) throw badRequest(`invalid selector: '${selector}'; can't understand '${term}'`);
    const [, field = '', op = '', value = ''] = match;
    if (!allowed.has(field)) {
      throw badRequest(`field label not supported: ${field}`);
    }
    return { field, operator: op === '!=' ? 'notEquals' : 'equals', value: unescape(value) };
  });
}

function fieldValue(obj: KubeObject, path: string): string {
  let current: unknown = obj;
  for (const segment of path.split('.')) {
    current = isPlainObject(current) ? current[segment] : undefined;
  }
  if (typeof current === 'string') return current;
  if (typeof current === 'number' || typeof current === 'boolean') return String(current);
  // Unset booleans read as false, as the API server's field label conversion reports them.
  if (current === undefined && (path === 'spec.hostNetwork' || path === 'spec.unschedulable')) return 'false';
  return '';
}

export function matchesFieldSelector(obj: KubeObject, selector: FieldSelector): boolean {
  return selector.every((requirement) => {
    const actual = fieldValue(obj, requirement.field);
    return requirement.operator === 'equals' ? actual === requirement.value : actual !== requirement.value;
  });
}
