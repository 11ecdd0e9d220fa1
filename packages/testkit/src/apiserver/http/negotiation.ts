import { parse as parseYaml } from 'yaml';
import { badRequest, requestEntityTooLarge } from '../errors.js';
import { jsonNestsDeeperThan, maxBodyNestingDepth, maxRequestBodyBytes, yamlNestsDeeperThan } from './body-bounds.js';

export type TableVersion = 'v1' | 'v1beta1';

interface MediaRange {
  type: string;
  params: Record<string, string>;
}

function parseAccept(accept: string): MediaRange[] {
  return accept
    .split(',')
    .map((part) => {
      const [type = '', ...params] = part.split(';').map((piece) => piece.trim());
      const parsed: Record<string, string> = {};
      for (const param of params) {
        const [key = '', value = ''] = param.split('=');
        parsed[key.trim()] = value.trim();
      }
      return { type: type.toLowerCase(), params: parsed };
    })
    .filter((range) => range.type !== '');
}

/**
 * The meta.k8s.io Table version the client prefers over plain JSON (kubectl get asks for
 * `application/json;as=Table;v=v1;g=meta.k8s.io, …, application/json`), or undefined for plain JSON.
 */
export function preferredTableVersion(accept: string | undefined): TableVersion | undefined {
  for (const range of parseAccept(accept ?? '')) {
    const json = range.type === 'application/json' || range.type === '*/*' || range.type === 'application/*';
    if (!json) continue;
    if (range.params.as === undefined) return undefined;
    if (range.params.as === 'Table' && range.params.g === 'meta.k8s.io' && (range.params.v === 'v1' || range.params.v === 'v1beta1')) {
      return range.params.v;
    }
  }
  return undefined;
}

/**
 * Parses a request body: JSON, or YAML when the client says so (handy with curl). Its size and nesting are bounded
 * first, because everything from the yaml library's composer on recurses once per level.
 */
export function parseBody(body: unknown, contentType: string | undefined): unknown {
  if (!Buffer.isBuffer(body) || body.length === 0) return undefined;
  if (body.length > maxRequestBodyBytes) throw requestEntityTooLarge(maxRequestBodyBytes);
  const text = body.toString('utf8');
  const yaml = /yaml/i.test(contentType ?? '');
  if (yaml ? yamlNestsDeeperThan(text, maxBodyNestingDepth) : jsonNestsDeeperThan(text, maxBodyNestingDepth)) {
    throw badRequest(`the request body could not be decoded: exceeded max depth of ${maxBodyNestingDepth} nested arrays and objects`);
  }
  try {
    return yaml ? parseYaml(text) : JSON.parse(text);
  } catch (error) {
    throw badRequest(`the request body could not be decoded: ${(error as Error).message}`);
  }
}
