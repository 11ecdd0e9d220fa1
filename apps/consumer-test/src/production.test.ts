/**
 * The production agent carries no test code: its production dependency graph, its build output, its tarball and the
 * image deploy/Dockerfile builds hold nothing of @kube-router/testkit or the lab.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { WORKSPACE_ROOT, workspacePackages } from './packing.js';

const TEST_CODE = ['@kube-router/testkit', '@kube-router/lab'];

interface BundleScript {
  productionClosure(name?: string): string[];
}
const bundleScript = (): Promise<BundleScript> => import(join(WORKSPACE_ROOT, 'deploy/agent-bundle.mjs')) as Promise<BundleScript>;

/** Every dependency edge (production only) of the workspace, `from -> to`. */
async function productionEdges(): Promise<Map<string, string[]>> {
  const edges = new Map<string, string[]>();
  for (const { manifest } of await workspacePackages()) edges.set(manifest.name, Object.keys(manifest.dependencies ?? {}));
  return edges;
}

/** A path of production dependencies from `from` to any of `targets`, or undefined. */
function pathTo(edges: Map<string, string[]>, from: string, targets: readonly string[]): string[] | undefined {
  const queue: string[][] = [[from]];
  const seen = new Set([from]);
  while (queue.length > 0) {
    const path = queue.shift() as string[];
    const last = path[path.length - 1] as string;
    if (targets.includes(last)) return path;
    for (const next of edges.get(last) ?? []) {
      if (seen.has(next)) continue;
      seen.add(next);
      queue.push([...path, next]);
    }
  }
  return undefined;
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

describe('the production agent carries no test code', () => {
  it('reaches no test kit through its production dependencies', async () => {
    const edges = await productionEdges();
    expect(pathTo(edges, '@kube-router/agent', TEST_CODE)).toBeUndefined();
    // The walk finds such a path when there is one: the lab runs the agent with the test kit.
    expect(pathTo(edges, '@kube-router/lab', ['@kube-router/testkit'])).toEqual(['@kube-router/lab', '@kube-router/testkit']);
  });

  it('agrees with the closure deploy/agent-bundle.mjs packs into the image', async () => {
    const closure = (await bundleScript()).productionClosure();
    expect(closure[0]).toBe('@kube-router/agent');
    expect(closure).toContain('@kube-router/controller');
    for (const name of TEST_CODE) expect(closure).not.toContain(name);
  });

  it('has no import of the test kit or of test helpers in its build output', async () => {
    const dist = join(WORKSPACE_ROOT, 'apps/agent/dist');
    const files = await filesUnder(dist);
    expect(files.length, 'apps/agent/dist is built').toBeGreaterThan(5);
    const offending: string[] = [];
    for (const file of files) {
      if (/\/testing\/|\.test\./.test(file)) offending.push(`${file}: test file`);
      else if (/\.(js|d\.ts)$/.test(file)) {
        const text = await readFile(file, 'utf8');
        for (const name of TEST_CODE) if (text.includes(name)) offending.push(`${file}: ${name}`);
      }
    }
    expect(offending).toEqual([]);
  });

  it('builds an image from the bundle only (and gobgpd\'s protos from Debian), never from the workspace folders', async () => {
    const dockerfile = await readFile(join(WORKSPACE_ROOT, 'deploy/Dockerfile'), 'utf8');
    const stages = dockerfile.split(/^FROM /m);
    const runtime = stages[stages.length - 1] as string;
    expect(dockerfile).toContain('node deploy/agent-bundle.mjs /bundle');
    expect(runtime).toMatch(/^COPY --from=build \/bundle\/node_modules /m);
    const copies = [...runtime.matchAll(/^COPY\s+(.*)$/gm)].map((m) => m[1] as string);
    // Besides the bundle, only the API protos of Debian's golang-github-osrg-gobgp-dev, which routing-bgp loads.
    const protos = '--from=build /usr/share/gocode/src/github.com/osrg/gobgp/api/*.proto /usr/share/gocode/src/github.com/osrg/gobgp/api/';
    expect(copies.filter((line) => !/--from=build \/bundle\//.test(line) && line !== protos)).toEqual([]);
    for (const name of ['testkit', 'apps/lab', 'packages']) expect(runtime).not.toContain(name);
  });
});
