/**
 * `npm run lint:manifests`: knip (every import declared by the package that makes it, no unused dependency) and
 * sherif (the workspace's manifest rules) over the workspace, then every public package packed as `npm publish`
 * would, its tarball (not its folder) checked with publint, @arethetypeswrong/cli and the rules of
 * manifest-rules.ts. Every tool runs and every problem is printed before the exit status says whether there were any.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { publint } from 'publint';
import { formatMessage } from 'publint/utils';
import { engineProblems, sourceMapProblems, unshippedTargets } from './manifest-rules.js';
import { packPublicPackages, WORKSPACE_ROOT, type PackedPackage } from './packing.js';

const run = promisify(execFile);

async function checkPackage(pkg: PackedPackage, unpackDir: string): Promise<string[]> {
  await run('tar', ['-xzf', pkg.tarball, '-C', unpackDir], { timeout: 60_000 });
  const root = join(unpackDir, 'package');
  const problems = [...engineProblems(pkg.manifest), ...unshippedTargets(pkg.manifest, pkg.files)];
  problems.push(...(await sourceMapProblems(root, pkg.files)));

  // The unpacked folder is exactly what was published, so publint needs no packing of its own.
  const manifest = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as Record<string, unknown>;
  const { messages } = await publint({ pkgDir: root, pack: false, level: 'suggestion', strict: true });
  for (const message of messages) problems.push(`publint: ${formatMessage(message, manifest, { color: false }) ?? message.code}`);

  // ESM-only packages: node10 and require() resolutions are out of scope by design (esm-only profile).
  const attw = join(WORKSPACE_ROOT, 'node_modules/.bin/attw');
  await run(attw, [pkg.tarball, '--profile', 'esm-only', '--format', 'ascii', '--no-color'], {
    timeout: 120_000,
    maxBuffer: 16 * 1024 * 1024,
  }).catch((error: { stdout?: string; stderr?: string; message: string }) => {
    problems.push(`@arethetypeswrong/cli:\n${(error.stdout || error.stderr || error.message).trim()}`);
  });
  return problems;
}

/** Runs a workspace tool to its end, printing its output; resolves whether it passed. */
async function workspaceTool(name: string, args: string[]): Promise<boolean> {
  const result = await run(join(WORKSPACE_ROOT, 'node_modules/.bin', name), args, {
    cwd: WORKSPACE_ROOT,
    timeout: 300_000,
    maxBuffer: 16 * 1024 * 1024,
  }).then(
    ({ stdout }) => ({ ok: true, output: stdout }),
    (error: { stdout?: string; stderr?: string; message: string }) => ({
      ok: false,
      output: `${error.stdout ?? ''}${error.stderr ?? ''}` || error.message,
    }),
  );
  console.log(`${result.ok ? 'ok  ' : 'FAIL'} ${name}${result.output.trim() ? `\n${result.output.trim()}` : ''}`);
  return result.ok;
}

const failedTools: string[] = [];
if (!(await workspaceTool('knip', ['--no-progress']))) failedTools.push('knip');
if (!(await workspaceTool('sherif', []))) failedTools.push('sherif');

const workDir = await mkdtemp(join(tmpdir(), 'kube-router-manifests-'));
let failed = 0;
try {
  const packed = await packPublicPackages(join(workDir, 'tarballs'));
  // Two packages at a time (attw takes seconds each); the results are printed in package order.
  const results: string[][] = [];
  let next = 0;
  const worker = async () => {
    for (let index = next++; index < packed.length; index = next++) {
      const unpackDir = join(workDir, `unpacked-${index}`);
      await mkdir(unpackDir, { recursive: true });
      results[index] = await checkPackage(packed[index] as PackedPackage, unpackDir);
    }
  };
  await Promise.all([worker(), worker()]);
  for (const [index, pkg] of packed.entries()) {
    const problems = results[index] ?? [];
    if (problems.length === 0) {
      console.log(`ok   ${pkg.manifest.name} (${pkg.files.length} files)`);
      continue;
    }
    failed += 1;
    console.log(`FAIL ${pkg.manifest.name}:\n${problems.map((p) => `  - ${p.replaceAll('\n', '\n    ')}`).join('\n')}`);
  }
  console.log(failed === 0 ? `${packed.length} packed packages are publishable` : `${failed} of ${packed.length} packed packages have problems`);
} finally {
  await rm(workDir, { recursive: true, force: true });
}
if (failedTools.length > 0) console.log(`failed: ${failedTools.join(', ')}`);
process.exitCode = failed === 0 && failedTools.length === 0 ? 0 : 1;
