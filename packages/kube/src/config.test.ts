import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadKubeConfig, resolveIdentity, resolveNamespace, resolveNodeName } from './config.js';
import { startTestCluster } from './testing/fixtures.js';
import type { TestCluster } from './testing/fixtures.js';
import { TOKEN_FILE_PROVIDER } from './token-file-auth.js';

let dir: string;
let cluster: TestCluster;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'krt-kubeconfig-test-'));
  cluster = await startTestCluster();
});

afterAll(async () => {
  await cluster.close();
  await rm(dir, { recursive: true, force: true });
});

async function serviceAccount(namespace?: string): Promise<string> {
  const accountDir = await mkdtemp(join(dir, 'sa-'));
  await writeFile(join(accountDir, 'token'), 'secret-token');
  await writeFile(join(accountDir, 'ca.crt'), 'not really a CA');
  if (namespace) await writeFile(join(accountDir, 'namespace'), `${namespace}\n`);
  return accountDir;
}

describe('loadKubeConfig', () => {
  it('loads --kubeconfig and talks to its server over plain HTTP', async () => {
    const kubeConfig = loadKubeConfig({ kubeconfig: await cluster.server.writeKubeconfig(), env: {} });
    expect(kubeConfig.getCurrentCluster()?.server).toBe(cluster.server.url);
    const namespaces = await kubeConfig.makeApiClient(CoreV1Api).listNamespace();
    expect(namespaces.items.map((ns) => ns.metadata?.name)).toContain('kube-system');
  });

  it('lets --master override the server of --kubeconfig', async () => {
    const kubeconfig = join(dir, 'elsewhere');
    await writeFile(kubeconfig, cluster.server.kubeconfigYaml().replace(cluster.server.url, 'https://10.255.255.1:6443'));
    const kubeConfig = loadKubeConfig({ kubeconfig, master: cluster.server.url, env: {} });
    expect(kubeConfig.getCurrentCluster()?.server).toBe(cluster.server.url);
    const nodes = await kubeConfig.makeApiClient(CoreV1Api).listNode();
    expect(nodes.items).toEqual([]);
  });

  it('uses the in-cluster service account, with --master overriding the service address', async () => {
    const accountDir = await serviceAccount('kube-router');
    const env = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };
    const inCluster = loadKubeConfig({ env, serviceAccountDir: accountDir });
    expect(inCluster.getCurrentCluster()).toMatchObject({ server: 'https://10.96.0.1:443', caFile: join(accountDir, 'ca.crt') });
    expect(inCluster.getCurrentUser()?.authProvider).toEqual({ name: TOKEN_FILE_PROVIDER, config: { path: join(accountDir, 'token') } });
    expect(inCluster.getContextObject(inCluster.getCurrentContext())?.namespace).toBe('kube-router');

    const v6 = loadKubeConfig({ env: { ...env, KUBERNETES_SERVICE_HOST: 'fd00::1' }, serviceAccountDir: accountDir });
    expect(v6.getCurrentCluster()?.server).toBe('https://[fd00::1]:443');

    const overridden = loadKubeConfig({ env, serviceAccountDir: accountDir, master: 'https://192.0.2.10:6443' });
    expect(overridden.getCurrentCluster()?.server).toBe('https://192.0.2.10:6443');
    // The token still goes with it.
    expect(overridden.getCurrentUser()?.authProvider?.config.path).toBe(join(accountDir, 'token'));
  });

  it('uses --master alone outside a cluster', async () => {
    const kubeConfig = loadKubeConfig({ master: cluster.server.url, env: {}, serviceAccountDir: join(dir, 'none') });
    const namespaces = await kubeConfig.makeApiClient(CoreV1Api).listNamespace();
    expect(namespaces.items.length).toBeGreaterThan(0);
  });

  it('falls back to KUBECONFIG, and says clearly when there is nothing to use', async () => {
    const kubeconfig = await cluster.server.writeKubeconfig(join(dir, 'from-env'));
    const kubeConfig = loadKubeConfig({ env: { KUBECONFIG: kubeconfig }, serviceAccountDir: join(dir, 'none') });
    expect(kubeConfig.getCurrentCluster()?.server).toBe(cluster.server.url);
    expect(() => loadKubeConfig({ env: {}, serviceAccountDir: join(dir, 'none') })).toThrow(
      /neither --kubeconfig nor --master was given/,
    );
    expect(() => loadKubeConfig({ kubeconfig: join(dir, 'missing'), env: {} })).toThrow(/does not exist/);
  });
});

describe('identity', () => {
  it('names the node from --hostname-override, else NODE_NAME, else the host name (kube-router\'s order)', () => {
    const hostname = () => 'host-1';
    expect(resolveNodeName({ env: { NODE_NAME: 'node-a' }, hostnameOverride: 'override', hostname })).toBe('override');
    expect(resolveNodeName({ env: { NODE_NAME: 'node-a' }, hostnameOverride: ' ', hostname })).toBe('node-a');
    expect(resolveNodeName({ env: { NODE_NAME: 'node-a' }, hostname })).toBe('node-a');
    expect(resolveNodeName({ env: {}, hostnameOverride: 'override', hostname })).toBe('override');
    expect(resolveNodeName({ env: { NODE_NAME: ' ' }, hostname })).toBe('host-1');
    expect(() => resolveNodeName({ env: {}, hostname: () => '' })).toThrow(/NODE_NAME/);
  });

  it('takes the leader election identity from POD_NAME, else the host name', () => {
    expect(resolveIdentity({ env: { POD_NAME: 'kube-router-x7k2p' }, hostname: () => 'host-1' })).toBe('kube-router-x7k2p');
    expect(resolveIdentity({ env: {}, hostname: () => 'host-1' })).toBe('host-1');
  });

  it('takes the namespace from POD_NAMESPACE, else the service account, else kube-system', async () => {
    const accountDir = await serviceAccount('networking');
    expect(resolveNamespace({ env: { POD_NAMESPACE: 'ops' }, serviceAccountDir: accountDir })).toBe('ops');
    expect(resolveNamespace({ env: {}, serviceAccountDir: accountDir })).toBe('networking');
    expect(resolveNamespace({ env: {}, serviceAccountDir: join(dir, 'none') })).toBe('kube-system');
  });
});
