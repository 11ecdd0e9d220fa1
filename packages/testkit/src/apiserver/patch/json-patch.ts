import { ApiError, badRequest } from '../errors.js';
import { isPlainObject } from '../kube-object.js';
import { ownValue, prototypeKey, setOwn } from './own-properties.js';

interface Operation {
  op: 'add' | 'remove' | 'replace' | 'move' | 'copy' | 'test';
  path: string;
  from?: string;
  value?: unknown;
}

type Container = Record<string, unknown> | unknown[];

function patchFailed(message: string): ApiError {
  return new ApiError(422, 'Invalid', `the server rejected our request due to an error in our request: ${message}`);
}

function parsePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw badRequest(`invalid JSON pointer "${pointer}"`);
  const tokens = pointer
    .slice(1)
    .split('/')
    .map((token) => token.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (tokens.includes(prototypeKey)) throw patchFailed(`path "${pointer}" names "${prototypeKey}", which is no field of any object`);
  return tokens;
}

/** The child a token names: an own property or an array index in range, never something inherited. */
function child(current: unknown, token: string): unknown {
  if (Array.isArray(current)) return /^\d+$/.test(token) ? current[Number(token)] : undefined;
  return isPlainObject(current) ? ownValue(current, token) : undefined;
}

function parseOperations(patch: unknown): Operation[] {
  if (!Array.isArray(patch)) throw badRequest('a JSON patch must be an array of operations');
  return patch.map((entry) => {
    if (!isPlainObject(entry) || typeof entry.op !== 'string' || typeof entry.path !== 'string') {
      throw badRequest(`invalid JSON patch operation: ${JSON.stringify(entry)}`);
    }
    if (!['add', 'remove', 'replace', 'move', 'copy', 'test'].includes(entry.op)) {
      throw badRequest(`unknown JSON patch operation "${entry.op}"`);
    }
    return entry as unknown as Operation;
  });
}

function parentOf(document: unknown, tokens: string[], pointer: string): { parent: Container; key: string } {
  let current: unknown = document;
  for (const token of tokens.slice(0, -1)) current = child(current, token);
  if (!Array.isArray(current) && !isPlainObject(current)) throw patchFailed(`path "${pointer}" does not exist`);
  return { parent: current, key: tokens[tokens.length - 1] as string };
}

function read(document: unknown, pointer: string): unknown {
  let current: unknown = document;
  for (const token of parsePointer(pointer)) {
    if (Array.isArray(current) && /^\d+$/.test(token) && Number(token) < current.length) current = current[Number(token)];
    else if (isPlainObject(current) && Object.hasOwn(current, token)) current = current[token];
    else throw patchFailed(`path "${pointer}" does not exist`);
  }
  return current;
}

function arrayIndex(array: unknown[], key: string, pointer: string, allowEnd: boolean): number {
  if (allowEnd && key === '-') return array.length;
  const index = /^\d+$/.test(key) ? Number(key) : NaN;
  if (!(index < array.length || (allowEnd && index === array.length))) {
    throw patchFailed(`index "${key}" is out of range in "${pointer}"`);
  }
  return index;
}

function add(document: unknown, pointer: string, value: unknown): unknown {
  const tokens = parsePointer(pointer);
  if (tokens.length === 0) return value;
  const { parent, key } = parentOf(document, tokens, pointer);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, key, pointer, true), 0, value);
  else setOwn(parent, key, value);
  return document;
}

function remove(document: unknown, pointer: string): unknown {
  const tokens = parsePointer(pointer);
  if (tokens.length === 0) throw patchFailed('cannot remove the whole document');
  const { parent, key } = parentOf(document, tokens, pointer);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, key, pointer, false), 1);
  else if (Object.hasOwn(parent, key)) delete parent[key];
  else throw patchFailed(`path "${pointer}" does not exist`);
  return document;
}

/** RFC 6902 JSON patch, the default patch type of @kubernetes/client-node. */
export function applyJsonPatch(target: unknown, patch: unknown): unknown {
  let document = structuredClone(target);
  for (const operation of parseOperations(patch)) {
    switch (operation.op) {
      case 'add':
        document = add(document, operation.path, structuredClone(operation.value));
        break;
      case 'remove':
        document = remove(document, operation.path);
        break;
      case 'replace':
        read(document, operation.path);
        document = add(remove(document, operation.path), operation.path, structuredClone(operation.value));
        break;
      case 'move':
      case 'copy': {
        if (operation.from === undefined) throw badRequest(`"${operation.op}" needs "from"`);
        const value = structuredClone(read(document, operation.from));
        if (operation.op === 'move') document = remove(document, operation.from);
        document = add(document, operation.path, value);
        break;
      }
      case 'test':
        if (JSON.stringify(read(document, operation.path)) !== JSON.stringify(operation.value)) {
          throw patchFailed(`test of "${operation.path}" failed`);
        }
        break;
    }
  }
  return document;
}
