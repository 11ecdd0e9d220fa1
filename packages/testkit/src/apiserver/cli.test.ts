import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runApiServerCli } from './cli.js';
import { parseManifests } from './seed.js';

const packageDir = join(dirname(fileURLToPath(import.meta.url)), '../..');
const tsxCli = createRequire(import.meta.url).resolve('tsx/cli');
let workDir: string;

beforeAll(async () => {
  workDir = await mkdtemp(join(tmpdir(), `krt-cli-${randomBytes(3).toString('hex')}-`));
});
afterAll(async () => {
  await rm(workDir, { recursive: true, force: true });
});

describe('manifests', () => {
  it('reads multi-document YAML and flattens Lists', () => {
    const objects = parseManifests(`
apiVersion: v1
kind: Namespace
metadata: {name: a}
---
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1}}
- {apiVersion: v1, kind: Node, metadata: {name: n2}}
`);
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual(['Namespace/a', 'Node/n1', 'Node/n2']);
    expect(() => parseManifests('metadata: {name: x}\n', 'bad.yaml')).toThrow(/bad.yaml: every document needs apiVersion and kind/);
  });
});

describe('bin/apiserver.ts', () => {
  it('serves seeded objects, writes a kubeconfig and stops on SIGTERM', async () => {
    const pods = join(workDir, 'pods.yaml');
    const namespaces = join(workDir, 'namespaces.yaml');
    const kubeconfig = join(workDir, 'kubeconfig');
    await writeFile(pods, 'apiVersion: v1\nkind: Pod\nmetadata: {name: seeded, namespace: cli}\nspec: {nodeName: node-1, containers: []}\n');
    await writeFile(namespaces, 'apiVersion: v1\nkind: Namespace\nmetadata: {name: cli}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: node-1}\n');

    const child = spawn(
      process.execPath,
      [tsxCli, '--conditions=@kube-router/source', 'bin/apiserver.ts', '--port', '0', '--seed', pods, '--seed', namespaces, '--kubeconfig', kubeconfig],
      { cwd: packageDir, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no start-up line in time: ${output}`)), 20_000);
        const check = () => {
          const match = /listening on (http:\/\/\S+)/.exec(output);
          if (match && output.includes('kubeconfig written')) {
            clearTimeout(timer);
            resolve(match[1] as string);
          }
        };
        child.stdout.on('data', check);
        child.on('exit', () => reject(new Error(`exited early: ${output}`)));
      });
      const pod = (await (await fetch(`${url}/api/v1/namespaces/cli/pods/seeded`)).json()) as { spec: { nodeName: string } };
      expect(pod.spec.nodeName).toBe('node-1');
      const nodes = (await (await fetch(`${url}/api/v1/nodes`)).json()) as { items: unknown[] };
      expect(nodes.items).toHaveLength(1);
      const config = parse(await readFile(kubeconfig, 'utf8')) as { clusters: { cluster: { server: string } }[]; 'current-context': string };
      expect(config.clusters[0]?.cluster.server).toBe(url);
      expect(config['current-context']).toBe('embedded');
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });
});

describe('bin/apiserver.ts with an IPC channel', () => {
  it('stops when its parent goes (the channel closes), as a bench that dies leaves no server behind', async () => {
    // tsx as a loader, not its CLI: the CLI runs the script in a child of its own, which the channel would not reach.
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@kube-router/source', 'bin/apiserver.ts', '--port', '0'], {
      cwd: packageDir,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no start-up line in time: ${output}`)), 20_000);
        child.stdout?.on('data', () => {
          const match = /listening on (http:\/\/\S+)/.exec(output);
          if (match) {
            clearTimeout(timer);
            resolve(match[1] as string);
          }
        });
        child.on('exit', () => reject(new Error(`exited early: ${output}`)));
      });
      expect((await fetch(`${url}/api/v1/namespaces`)).ok).toBe(true);
      child.disconnect();
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

describe('--no-validation', () => {
  it('stores what the schemas refuse, which the default refuses', async () => {
    const badPod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'bad' }, spec: { containers: 5 } };
    for (const [args, status] of [[[], 400], [['--no-validation'], 201]] as const) {
      const server = await runApiServerCli(['--port', '0', ...args], () => {});
      try {
        const response = await fetch(`${server.url}/api/v1/namespaces/default/pods`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(badPod),
        });
        expect(response.status, args.join(' ')).toBe(status);
      } finally {
        await server.close();
      }
    }
  });
});
