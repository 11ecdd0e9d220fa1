import { createServer, type Server } from 'node:http';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadKubeConfig } from './config.js';
import { listPage } from './http-list.js';

/**
 * A server that answers 401, as kube-apiserver does, to any request without the one bearer token it accepts now:
 * enough to show which credentials each kind of request carries.
 */
let server: Server;
let accepted = 'first-token';
const seen: string[] = [];
let dir = '';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'krt-token-file-'));
  server = createServer((request, response) => {
    seen.push(`${request.method} ${request.headers.authorization ?? 'none'}`);
    response.setHeader('content-type', 'application/json');
    if (request.headers.authorization !== `Bearer ${accepted}`) {
      response.writeHead(401).end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Unauthorized', code: 401 }));
      return;
    }
    if (request.method === 'POST') {
      response.writeHead(201).end(JSON.stringify({ kind: 'ConfigMap', apiVersion: 'v1', metadata: { name: 'written', namespace: 'default' } }));
      return;
    }
    response.writeHead(200).end(JSON.stringify({ kind: 'NodeList', apiVersion: 'v1', metadata: { resourceVersion: '1' }, items: [] }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});

afterEach(() => {
  vi.useRealTimers();
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

/** kubeadm's kube-proxy kubeconfig, as kube-router's kubeadm DaemonSets mount it, with the token file beside it. */
async function kubeadmKubeconfig(key: 'tokenFile' | 'token-file', tokenPath: string): Promise<string> {
  const { port } = server.address() as AddressInfo;
  const file = join(dir, `kubeconfig-${key}`);
  await writeFile(
    file,
    `apiVersion: v1
kind: Config
clusters:
- cluster:
    server: http://127.0.0.1:${port}
  name: default
contexts:
- context:
    cluster: default
    namespace: default
    user: default
  name: default
current-context: default
users:
- name: default
  user:
    ${key}: ${tokenPath}
`,
  );
  return file;
}

describe('a kubeconfig whose user has a token file', () => {
  it.each(['tokenFile', 'token-file'] as const)('%s: lists and writes with the token, and with a rotated one within a minute', async (key) => {
    vi.useFakeTimers({ toFake: ['Date'] });
    accepted = 'first-token';
    await writeFile(join(dir, `token-${key}`), 'first-token');
    // Relative to the kubeconfig's directory, as client-go reads it.
    const kubeConfig = loadKubeConfig({ kubeconfig: await kubeadmKubeconfig(key, `token-${key}`), env: {} });
    const list = () => listPage(kubeConfig, '/api/v1/nodes', {}, 'nodes', 5_000);
    const write = () => kubeConfig.makeApiClient(CoreV1Api).createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'written' } } });
    await expect(list()).resolves.toMatchObject({ items: [] });
    await expect(write()).resolves.toMatchObject({ metadata: { name: 'written' } });

    // The token rotates: the file changes and the server takes only the new one.
    await writeFile(join(dir, `token-${key}`), 'second-token');
    accepted = 'second-token';
    vi.setSystemTime(Date.now() + 61_000);
    seen.length = 0;
    await expect(list()).resolves.toMatchObject({ items: [] });
    await expect(write()).resolves.toMatchObject({ metadata: { name: 'written' } });
    expect(seen).toEqual(['GET Bearer second-token', 'POST Bearer second-token']);
  });

  /** A client on kubeadm's kubeconfig whose token file at `name` holds `content`, after one list that works. */
  async function listingWithTokenFile(name: string, content: string) {
    accepted = 'first-token';
    const path = join(dir, name);
    await writeFile(path, content);
    const kubeConfig = loadKubeConfig({ kubeconfig: await kubeadmKubeconfig('tokenFile', path), env: {} });
    const list = () => listPage(kubeConfig, '/api/v1/nodes', {}, 'nodes', 5_000);
    await expect(list()).resolves.toMatchObject({ items: [] });
    return { path, list };
  }

  it('uses a rotated token at the first request after the file changes, and trims it as client-go does', async () => {
    const { path, list } = await listingWithTokenFile('token-rotating', 'first-token\n');
    // The kubelet swaps the projected token; kube-apiserver takes only the new one. No minute passes.
    await writeFile(`${path}.new`, 'second-token-longer\n');
    await rename(`${path}.new`, path);
    accepted = 'second-token-longer';
    seen.length = 0;
    await expect(list()).resolves.toMatchObject({ items: [] });
    expect(seen).toEqual(['GET Bearer second-token-longer']);
  });

  it('keeps sending the token read last while the file is briefly gone, and names the file when it never was there', async () => {
    const { path, list } = await listingWithTokenFile('token-vanishing', 'first-token');
    await rm(path);
    await expect(list()).resolves.toMatchObject({ items: [] });
    const missing = loadKubeConfig({ kubeconfig: await kubeadmKubeconfig('tokenFile', join(dir, 'never')), env: {} });
    await expect(listPage(missing, '/api/v1/nodes', {}, 'nodes', 5_000)).rejects.toThrow(`cannot read the bearer token file ${join(dir, 'never')}`);
  });

  it('an inline token wins over a token file, as in client-go', async () => {
    const file = await kubeadmKubeconfig('tokenFile', join(dir, 'no-such-file'));
    await writeFile(file, `${(await import('node:fs')).readFileSync(file, 'utf8')}    token: first-token\n`);
    accepted = 'first-token';
    const kubeConfig = loadKubeConfig({ kubeconfig: file, env: {} });
    await expect(listPage(kubeConfig, '/api/v1/nodes', {}, 'nodes', 5_000)).resolves.toMatchObject({ items: [] });
  });
});
