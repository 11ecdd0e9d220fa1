import { readFile } from 'node:fs/promises';
import { parseAllDocuments } from 'yaml';
import type { KubeObject } from './kube-object.js';
import { isPlainObject } from './kube-object.js';

/** The objects in a multi-document YAML text; `kind: List` documents are flattened into their items. */
export function parseManifests(text: string, source = 'manifest'): KubeObject[] {
  const objects: KubeObject[] = [];
  for (const document of parseAllDocuments(text)) {
    if (document.errors.length > 0) throw new Error(`${source}: ${document.errors[0]?.message ?? 'invalid YAML'}`);
    const value: unknown = document.toJS();
    if (value === null || value === undefined) continue;
    const items = isPlainObject(value) && typeof value.kind === 'string' && value.kind.endsWith('List') && Array.isArray(value.items) ? value.items : [value];
    for (const item of items) {
      if (!isPlainObject(item) || typeof item.apiVersion !== 'string' || typeof item.kind !== 'string') {
        throw new Error(`${source}: every document needs apiVersion and kind`);
      }
      objects.push({ ...item, metadata: isPlainObject(item.metadata) ? item.metadata : {} } as KubeObject);
    }
  }
  return objects;
}

export async function loadManifestFiles(paths: readonly string[]): Promise<KubeObject[]> {
  const objects: KubeObject[] = [];
  for (const path of paths) objects.push(...parseManifests(await readFile(path, 'utf8'), path));
  return objects;
}
