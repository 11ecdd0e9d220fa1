import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { engineProblems, manifestTargets, sourceMapProblems, unshippedTargets } from './manifest-rules.js';

const manifest = {
  name: '@kube-router/example',
  version: '0.1.0',
  exports: {
    '.': { '@kube-router/source': './src/index.ts', types: './dist/index.d.ts', default: './dist/index.js' },
  },
  bin: { example: './dist/cli.js' },
};

describe('manifest rules', () => {
  it('collects every condition of every export, and the bin', () => {
    expect(manifestTargets(manifest).map((t) => `${t.where} ${t.target}`)).toEqual([
      'exports["."]["@kube-router/source"] ./src/index.ts',
      'exports["."]["types"] ./dist/index.d.ts',
      'exports["."]["default"] ./dist/index.js',
      'bin["example"] ./dist/cli.js',
    ]);
  });

  it('refuses a source condition that points at unshipped source', () => {
    expect(unshippedTargets(manifest, ['dist/index.d.ts', 'dist/index.js', 'dist/cli.js', 'package.json'])).toEqual([
      'exports["."]["@kube-router/source"] points at ./src/index.ts, which the tarball does not contain',
    ]);
    expect(unshippedTargets(manifest, ['dist/index.d.ts', 'dist/index.js', 'dist/cli.js', 'src/index.ts'])).toEqual([]);
  });

  it('wants engines.node', () => {
    expect(engineProblems(manifest)).toHaveLength(1);
    expect(engineProblems({ ...manifest, engines: { node: '>=20.19' } })).toEqual([]);
  });

  const dir = mkdtemp(join(tmpdir(), 'kube-router-maps-'));
  afterAll(async () => rm(await dir, { recursive: true, force: true }));

  it('refuses source maps whose sources are not shipped', async () => {
    const root = await dir;
    await mkdir(join(root, 'dist'), { recursive: true });
    await writeFile(join(root, 'dist/index.js.map'), JSON.stringify({ version: 3, sources: ['../src/index.ts'] }));
    expect(await sourceMapProblems(root, ['dist/index.js', 'dist/index.js.map'])).toEqual([
      'dist/index.js.map names ../src/index.ts (src/index.ts), which the tarball does not contain',
    ]);
    expect(await sourceMapProblems(root, ['dist/index.js', 'dist/index.js.map', 'src/index.ts'])).toEqual([]);
  });
});
