import { readFile } from 'node:fs/promises';
import { dirname, join, normalize, posix } from 'node:path';
import type { Manifest } from './packing.js';

/**
 * The checks of a packed package that publint and attw leave out: an export condition of any name (also
 * `@kube-router/source`) or a bin that points at a file the tarball lacks, a missing `engines.node`, and source maps
 * whose sources are not in the tarball. Each returns readable problems, empty when the package is right.
 */

/** Every file an export condition, `main`, `types` or `bin` names, with where the manifest names it. */
export function manifestTargets(manifest: Manifest): { where: string; target: string }[] {
  const targets: { where: string; target: string }[] = [];
  const walk = (value: unknown, where: string): void => {
    if (typeof value === 'string') targets.push({ where, target: value });
    else if (Array.isArray(value)) value.forEach((v, i) => walk(v, `${where}[${i}]`));
    else if (value && typeof value === 'object') {
      for (const [key, v] of Object.entries(value)) walk(v, `${where}[${JSON.stringify(key)}]`);
    }
  };
  walk(manifest.exports, 'exports');
  if (typeof manifest.bin === 'string') targets.push({ where: 'bin', target: manifest.bin });
  else walk(manifest.bin, 'bin');
  if (manifest.main) targets.push({ where: 'main', target: manifest.main });
  if (manifest.types) targets.push({ where: 'types', target: manifest.types });
  return targets;
}

export function unshippedTargets(manifest: Manifest, files: readonly string[]): string[] {
  const shipped = new Set(files);
  return manifestTargets(manifest)
    .filter(({ target }) => !target.includes('*') && !shipped.has(posix.normalize(target)))
    .map(({ where, target }) => `${where} points at ${target}, which the tarball does not contain`);
}

export function engineProblems(manifest: Manifest): string[] {
  return manifest.engines?.node ? [] : ['engines.node is not set (the Node.js versions this package supports)'];
}

/** Source maps (.js.map, .d.ts.map) in the tarball whose `sources` name files the tarball lacks. */
export async function sourceMapProblems(packageRoot: string, files: readonly string[]): Promise<string[]> {
  const shipped = new Set(files);
  const problems: string[] = [];
  for (const file of files.filter((f) => f.endsWith('.map'))) {
    const map = JSON.parse(await readFile(join(packageRoot, file), 'utf8')) as { sources?: string[]; sourceRoot?: string };
    for (const source of map.sources ?? []) {
      const resolved = normalize(join(dirname(file), map.sourceRoot ?? '', source)).split('\\').join('/');
      if (!shipped.has(resolved)) problems.push(`${file} names ${source} (${resolved}), which the tarball does not contain`);
    }
  }
  return problems;
}
