/**
 * What a platform team does: install the packed packages in a project of its own, outside this workspace, and build
 * an agent from them. Every public package is packed and installed (the third-party packages come from npm's cache,
 * or the registry); the project in ../consumer (lballoc plus a plugin of its own) is compiled with tsc against the
 * installed declarations, run against the embedded API server of the installed @kube-router/testkit and probed over
 * HTTP; then the contract suite of the installed @kube-router/controller runs against the team's plugin.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { extractCustomAgentExample } from './docs-example.js';
import { packPublicPackages, WORKSPACE_ROOT } from './packing.js';

const run = promisify(execFile);
const FIXTURE = join(WORKSPACE_ROOT, 'apps/consumer-test/consumer');
const TSC = join(WORKSPACE_ROOT, 'node_modules/.bin/tsc');

/** What the consumer project needs besides our tarballs, at the versions our packages pin. */
const THIRD_PARTY = ['@kubernetes/client-node', 'prom-client', 'zod', 'pino', '@types/node', 'vitest'];

async function installedVersion(name: string): Promise<string> {
  const manifest = JSON.parse(await readFile(join(WORKSPACE_ROOT, 'node_modules', name, 'package.json'), 'utf8'));
  return (manifest as { version: string }).version;
}

interface ApiServerLike {
  writeKubeconfig(): Promise<string>;
  close(): Promise<void>;
}

let project: string;
let api: ApiServerLike | undefined;
let agent: ChildProcess | undefined;

beforeAll(async () => {
  project = await mkdtemp(join(tmpdir(), 'kube-router-consumer-'));
  const packed = await packPublicPackages(join(project, 'tarballs'));
  const dependencies: Record<string, string> = {};
  for (const pkg of packed) dependencies[pkg.manifest.name] = `file:./tarballs/${basename(pkg.tarball)}`;
  for (const name of THIRD_PARTY) dependencies[name] = await installedVersion(name);
  await writeFile(
    join(project, 'package.json'),
    JSON.stringify({ name: 'platform-agent', private: true, type: 'module', dependencies }, null, 2),
  );
  // Unlocked, the third-party packages' own dependencies resolve from their registry documents, which are revalidated
  // (--prefer-online): a stale one in npm's cache (--prefer-offline) can predate the version a fresh one requires
  // (openid-client 6.9.1 wanting oauth4webapi ^3.8.9, which a cached document did not list). Tarballs still come from
  // the cache by their integrity.
  await run('npm', ['install', '--prefer-online', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: project,
    timeout: 180_000,
    maxBuffer: 16 * 1024 * 1024,
  });
  await cp(join(FIXTURE, 'src'), join(project, 'src'), { recursive: true });
  await cp(join(FIXTURE, 'tsconfig.json'), join(project, 'tsconfig.json'));
  // The docs' custom agent compiles against the installed packages too, as a reader would paste it.
  await writeFile(join(project, 'src/docs-custom-agent.ts'), extractCustomAgentExample(await readDocs()));
  await run(TSC, ['-p', 'tsconfig.json'], { cwd: project, timeout: 180_000 }).catch((error: { stdout?: string }) => {
    throw new Error(`tsc failed in the consumer project:\n${error.stdout ?? String(error)}`);
  });
}, 420_000);

afterAll(async () => {
  if (agent && agent.exitCode === null) agent.kill('SIGKILL');
  await api?.close();
  if (project) await rm(project, { recursive: true, force: true });
});

const readDocs = () => readFile(join(WORKSPACE_ROOT, 'docs/plugins.md'), 'utf8');

/** The first line the process prints, parsed as JSON; the start fails with its stderr if it exits or is silent. */
function firstJsonLine(child: ChildProcess, timeoutMs: number): Promise<Record<string, string>> {
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start line within ${timeoutMs} ms; stderr:\n${stderr}`)), timeoutMs);
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      if (!line.startsWith('{"healthUrl"')) return;
      clearTimeout(timer);
      resolve(JSON.parse(line) as Record<string, string>);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the agent exited with ${code} before it ran; stderr:\n${stderr}`));
    });
  });
}

async function eventually<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${what} within ${timeoutMs} ms${last ? `: ${String(last)}` : ''}`);
}

/** The value of `name{controller="..."}` in a Prometheus text exposition, or undefined when the series is absent. */
function seriesValue(exposition: string, name: string, controller: string): number | undefined {
  const line = exposition.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(`controller="${controller}"`));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('a platform team consumes the packed packages', () => {
  it('runs a custom assembly (lballoc and its own plugin) against the embedded API server', async () => {
    // The installed API server module itself: vitest resolves bare imports with the workspace's source condition, which
    // would send the tarball's other modules to their .ts sources (the agent below runs under plain node).
    const testkit = (await import(pathToFileURL(join(project, 'node_modules/@kube-router/testkit/dist/apiserver/server.js')).href)) as {
      startApiServer(options: { port: number }): Promise<ApiServerLike>;
    };
    api = await testkit.startApiServer({ port: 0 });
    const kubeconfig = await api.writeKubeconfig();
    const child = spawn(process.execPath, ['dist/agent.js'], {
      cwd: project,
      env: { PATH: process.env.PATH, KUBECONFIG: kubeconfig, NODE_NAME: 'consumer-node' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    agent = child;
    const { healthUrl, metricsUrl } = await firstJsonLine(child, 60_000);

    const healthz = await fetch(`${healthUrl}/healthz?verbose`);
    const body = await healthz.text();
    expect(healthz.status, body).toBe(200);
    expect(body).toContain('[+]lballoc ok');
    expect(body).toContain('[+]namespace-count ok');

    const exposition = await eventually('both controllers have synced once', async () => {
      const text = await (await fetch(metricsUrl!)).text();
      const synced = ['lballoc', 'namespace-count'].every(
        (c) => (seriesValue(text, 'kube_router_controller_sync_last_success', c) ?? 0) > 0,
      );
      return synced ? text : undefined;
    });
    for (const controller of ['lballoc', 'namespace-count']) {
      expect(seriesValue(exposition, 'kube_router_controller_sync_last_success', controller)).toBeGreaterThan(Date.now() / 1000 - 120);
      expect(seriesValue(exposition, 'kube_router_controller_sync_failures_total', controller)).toBe(0);
    }
    // The team's own metric, on the agent's registry next to the contract's series.
    expect(exposition).toMatch(/^consumer_namespaces \d+$/m);

    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  }, 120_000);

  it('passes the installed contract suite with its own plugin', async () => {
    const report = join(project, 'contract-report.json');
    await run(
      join(project, 'node_modules/.bin/vitest'),
      ['run', 'src/contract.test.ts', '--reporter=json', `--outputFile=${report}`],
      { cwd: project, timeout: 120_000, env: { ...process.env, VITEST_REPORT_DIR: '' } },
    ).catch(async (error: { stdout?: string; stderr?: string }) => {
      throw new Error(`the contract suite failed:\n${error.stderr ?? ''}\n${await readFile(report, 'utf8').catch(() => '')}`);
    });
    const result = JSON.parse(await readFile(report, 'utf8')) as {
      numPassedTests: number;
      numFailedTests: number;
      numTodoTests: number;
    };
    // Six checks, the options check included: none may be a todo or skipped.
    expect(result).toMatchObject({ numPassedTests: 6, numFailedTests: 0, numTodoTests: 0 });
  }, 120_000);
});
