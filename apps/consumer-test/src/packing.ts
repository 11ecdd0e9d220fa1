import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const WORKSPACE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/** The package.json fields the release checks read. */
export interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  type?: string;
  engines?: Record<string, string>;
  exports?: unknown;
  bin?: string | Record<string, string>;
  main?: string;
  types?: string;
  files?: string[];
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

export interface WorkspacePackage {
  /** Absolute directory of the package in the workspace. */
  dir: string;
  manifest: Manifest;
}

export interface PackedPackage extends WorkspacePackage {
  /** Absolute path of the tarball `npm pack` wrote. */
  tarball: string;
  /** Paths inside the tarball, relative to its `package/` folder. */
  files: string[];
}

/** Every workspace package (the root's `workspaces` globs are `<folder>/*`), in directory order. */
export async function workspacePackages(): Promise<WorkspacePackage[]> {
  const root = JSON.parse(await readFile(join(WORKSPACE_ROOT, 'package.json'), 'utf8')) as { workspaces: string[] };
  const found: WorkspacePackage[] = [];
  for (const pattern of root.workspaces) {
    if (!pattern.endsWith('/*')) throw new Error(`workspace pattern ${pattern}: only <folder>/* is supported here`);
    const parent = join(WORKSPACE_ROOT, pattern.slice(0, -2));
    for (const name of (await readdir(parent)).sort()) {
      const file = join(parent, name, 'package.json');
      if (!existsSync(file)) continue;
      found.push({ dir: join(parent, name), manifest: JSON.parse(await readFile(file, 'utf8')) as Manifest });
    }
  }
  return found;
}

/** The packages a platform team installs from the registry. */
export async function publicPackages(): Promise<WorkspacePackage[]> {
  return (await workspacePackages()).filter((p) => p.manifest.private !== true);
}

/**
 * `npm pack`s every public package into `destination`, from its built dist/ (nx builds them first: the checks'
 * targets depend on every package's build). A package without dist/ is refused with the command that builds it.
 */
export async function packPublicPackages(destination: string): Promise<PackedPackage[]> {
  await mkdir(destination, { recursive: true });
  const packages = await publicPackages();
  const unbuilt = packages.filter((p) => !existsSync(join(p.dir, 'dist')));
  if (unbuilt.length > 0) {
    throw new Error(
      `not built: ${unbuilt.map((p) => p.manifest.name).join(', ')}; run \`npx nx run-many -t build\` first ` +
        '(nx does it before the consumer-test targets)',
    );
  }
  const packed: PackedPackage[] = [];
  for (const pkg of packages) {
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', destination], {
      cwd: pkg.dir,
      timeout: 60_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    const [report] = JSON.parse(stdout) as [{ filename: string; files: { path: string }[] }];
    packed.push({ ...pkg, tarball: join(destination, report.filename), files: report.files.map((f) => f.path).sort() });
  }
  return packed;
}
