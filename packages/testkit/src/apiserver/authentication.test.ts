// HTTPS with the server's own CA and bearer tokens, as kube-apiserver serves a kubeadm cluster: what the agent's
// kubeadm kubeconfig (tokenFile, ca.crt) must get through, with client-node and kubectl as the clients.
import { execFile, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { ApiServer } from './server.js';
import { startApiServer } from './server.js';

const hasKubectl = spawnSync('kubectl', ['version', '--client'], { timeout: 10_000 }).status === 0;

let server: ApiServer;
let dir = '';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'krt-authn-'));
  server = await startApiServer({ tls: true, tokens: ['first-token'] });
});
afterAll(async () => {
  await server.close();
  await rm(dir, { recursive: true, force: true });
});

/** One HTTPS GET with the server's CA, as a client that sends `token` (or nothing). */
function get(path: string, token?: string): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const call = request(`${server.url}${path}`, { ca: server.ca, headers: token ? { authorization: `Bearer ${token}` } : {} }, (response) => {
      let text = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text.startsWith('{') ? JSON.parse(text) : { text } }));
    });
    call.on('error', reject).end();
  });
}

function namespaces(kubeconfig: string) {
  const config = new KubeConfig();
  config.loadFromFile(kubeconfig);
  return config.makeApiClient(CoreV1Api).listNamespace();
}

describe('an HTTPS API server that requires bearer tokens', () => {
  it('answers 401 Unauthorized as kube-apiserver does without a token or with a wrong one, and serves the right one', async () => {
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const unauthorized = { kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'Unauthorized', reason: 'Unauthorized', code: 401 };
    expect(await get('/api/v1/namespaces')).toMatchObject({ status: 401, body: unauthorized });
    expect(await get('/api/v1/namespaces', 'other-token')).toMatchObject({ status: 401, body: unauthorized });
    expect((await get('/api/v1/namespaces', 'first-token')).status).toBe(200);
    expect((await get('/version')).status).toBe(401);
    // Probes need no credentials.
    expect(await get('/readyz')).toMatchObject({ status: 200 });
  });

  it('is reached by client-node through a kubeconfig that trusts its CA, with a token or a kubeadm tokenFile', async () => {
    const list = await namespaces(await server.writeKubeconfig(join(dir, 'token.kubeconfig')));
    expect(list.items.map((ns) => ns.metadata?.name)).toContain('kube-system');
    const tokenFile = join(dir, 'token');
    await writeFile(tokenFile, 'first-token\n');
    const caFile = join(dir, 'ca.crt');
    await writeFile(caFile, server.ca!);
    const kubeadm = parse(await readFile(await server.writeKubeconfig(join(dir, 'kubeadm.kubeconfig'), { caFile, tokenFile }), 'utf8'));
    // kubeadm's kube-proxy form: the CA and the token by file, nothing inline.
    expect(kubeadm.clusters[0].cluster).toEqual({ server: server.url, 'certificate-authority': caFile });
    expect(kubeadm.users[0].user).toEqual({ tokenFile });
  });

  it('turns a rotated token away once the server accepts only the new one', async () => {
    server.authentication.setTokens(['second-token']);
    try {
      expect((await get('/api/v1/namespaces', 'first-token')).status).toBe(401);
      expect((await get('/api/v1/namespaces', 'second-token')).status).toBe(200);
      expect(server.authentication.tokens).toEqual(['second-token']);
    } finally {
      server.authentication.setTokens(['first-token']);
    }
  });

  it.skipIf(!hasKubectl)(`serves kubectl through the kubeconfig it writes, and kubectl says Unauthorized without the token${hasKubectl ? '' : ' (skipped: kubectl is not installed)'}`, async () => {
    const kubectl = (kubeconfig: string) =>
      new Promise<{ code: number; output: string }>((resolve) => {
        execFile('kubectl', ['--kubeconfig', kubeconfig, '--cache-dir', join(dir, 'cache'), 'get', 'namespaces', '-o', 'name'], { timeout: 20_000 }, (error, stdout, stderr) =>
          resolve({ code: error ? 1 : 0, output: `${stdout}${stderr}` }),
        );
      });
    const ok = await kubectl(await server.writeKubeconfig(join(dir, 'kubectl.kubeconfig')));
    expect(ok).toMatchObject({ code: 0, output: expect.stringContaining('namespace/kube-system') });
    const refused = await kubectl(await server.writeKubeconfig(join(dir, 'wrong.kubeconfig'), { token: 'wrong' }));
    expect(refused).toMatchObject({ code: 1, output: expect.stringContaining('Unauthorized') });
  });
});
