#!/usr/bin/env node
// The agent image's contents, as a platform team would install it: `node deploy/agent-bundle.mjs <dir>` packs the
// agent and the workspace packages its production dependencies reach (built dist/ first: `nx run
// @kube-router/agent:build`) into <dir>/tarballs and writes <dir>/package.json naming them, for
// `npm install --omit=dev` in <dir>. Nothing else of the workspace (the test kit, the lab, sources) reaches the image.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import process from 'node:process';
import { fileURLToPath, URL } from 'node:url';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
export const AGENT = '@kube-router/agent';

/** Workspace packages by name: { dir, manifest }. */
export function workspaceManifests(root = ROOT) {
  const byName = new Map();
  const { workspaces } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  for (const pattern of workspaces) {
    const parent = join(root, pattern.replace(/\/\*$/, ''));
    for (const name of readdirSync(parent)) {
      const file = join(parent, name, 'package.json');
      if (!existsSync(file)) continue;
      const manifest = JSON.parse(readFileSync(file, 'utf8'));
      byName.set(manifest.name, { dir: join(parent, name), manifest });
    }
  }
  return byName;
}

/** The workspace packages that `name`'s production dependencies reach, `name` included, in visiting order. */
export function productionClosure(name = AGENT, packages = workspaceManifests()) {
  const seen = [];
  const visit = (current) => {
    if (seen.includes(current) || !packages.has(current)) return;
    seen.push(current);
    for (const dependency of Object.keys(packages.get(current).manifest.dependencies ?? {})) visit(dependency);
  };
  visit(name);
  return seen;
}

/** Packs the closure of `root`'s workspace (this repository, or a copy of its packages with their dist/) into `out`. */
export function bundle(out, root = ROOT) {
  const packages = workspaceManifests(root);
  const tarballs = join(out, 'tarballs');
  mkdirSync(tarballs, { recursive: true });
  const dependencies = {};
  for (const name of productionClosure(AGENT, packages)) {
    const [report] = JSON.parse(
      execFileSync('npm', ['pack', '--json', '--pack-destination', tarballs], {
        cwd: packages.get(name).dir,
        timeout: 120_000,
        encoding: 'utf8',
      }),
    );
    dependencies[name] = `file:./tarballs/${report.filename}`;
  }
  const manifest = { name: 'kube-router-agent-image', private: true, type: 'module', dependencies };
  writeFileSync(join(out, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  process.stderr.write(`${out}: ${Object.keys(dependencies).join(', ')}\n`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = process.argv[2];
  if (!out) {
    process.stderr.write('usage: node deploy/agent-bundle.mjs <output directory>\n');
    process.exit(2);
  }
  bundle(resolve(out));
}
