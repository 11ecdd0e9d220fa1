// RBAC over HTTPS, as kube-apiserver enforces it: tokens that authenticate a ServiceAccount, Roles and bindings
// created, listed and watched like any other object, and a 403 Status for what they do not grant, which client-node
// and kubectl see as they would from a cluster.
import { execFile, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceAccountUser } from './authentication.js';
import type { ApiServer } from './server.js';
import { startApiServer } from './server.js';

const hasKubectl = spawnSync('kubectl', ['version', '--client'], { timeout: 10_000 }).status === 0;
const ROUTER = 'system:serviceaccount:kube-system:kube-router';

let server: ApiServer;
let dir = '';

const rbac = 'rbac.authorization.k8s.io/v1';
const readerRole = {
  apiVersion: rbac,
  kind: 'ClusterRole',
  metadata: { name: 'service-reader' },
  rules: [
    { apiGroups: [''], resources: ['services'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['services/status'], verbs: ['update'] },
  ],
};
const readerBinding = {
  apiVersion: rbac,
  kind: 'ClusterRoleBinding',
  metadata: { name: 'service-reader' },
  roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'service-reader' },
  subjects: [{ kind: 'ServiceAccount', name: 'kube-router', namespace: 'kube-system' }],
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'krt-rbac-'));
  server = await startApiServer({
    tls: true,
    rbac: true,
    tokens: ['admin-token', { token: 'router-token', user: serviceAccountUser('kube-system', 'kube-router') }],
    seed: [
      readerRole,
      readerBinding,
      { apiVersion: 'v1', kind: 'Service', metadata: { name: 'x', namespace: 'default' }, spec: { ports: [{ port: 80 }] } },
    ],
  });
});
afterAll(async () => {
  await server.close();
  await rm(dir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  body: Record<string, unknown>;
  text: string;
}

/** One HTTPS request with the server's CA and `token`; a watch is answered by its status and first line only. */
function call(method: string, path: string, token: string, body?: unknown, contentType = 'application/json'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers = { authorization: `Bearer ${token}`, ...(payload !== undefined && { 'content-type': contentType }) };
    const sent = request(`${server.url}${path}`, { method, ca: server.ca, headers }, (response) => {
      let text = '';
      response.setEncoding('utf8').on('data', (chunk: string) => {
        text += chunk;
        // A watch stays open: its first event is all a test needs.
        if (path.includes('watch=true') && text.includes('\n')) response.destroy();
      });
      const done = () => resolve({ status: response.statusCode ?? 0, text, body: text.startsWith('{') ? JSON.parse(text.split('\n')[0] as string) : {} });
      response.on('end', done).on('close', done);
    });
    sent.on('error', reject);
    sent.end(payload);
  });
}

describe('an API server with RBAC on', () => {
  it('serves Roles, ClusterRoles and their bindings: created, listed and watched like any other kind, checked like kube-apiserver', async () => {
    const role = { apiVersion: rbac, kind: 'Role', metadata: { name: 'lease-writer' }, rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] }] };
    expect((await call('POST', '/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/roles', 'admin-token', role)).status).toBe(201);
    const list = await call('GET', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', 'admin-token');
    expect(list.body.kind).toBe('ClusterRoleBindingList');
    // Besides the seed, kube-apiserver's bootstrap bindings: cluster-admin for system:masters, discovery for everyone.
    expect((list.body.items as { metadata: { name: string } }[]).map((item) => item.metadata.name)).toEqual(
      expect.arrayContaining(['service-reader', 'cluster-admin', 'system:discovery', 'system:public-info-viewer']),
    );
    const watch = await call('GET', '/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/roles?watch=true&resourceVersion=0', 'admin-token');
    expect(watch.body).toMatchObject({ type: 'ADDED', object: { kind: 'Role', metadata: { name: 'lease-writer' } } });
    // A ClusterRoleBinding binds only ClusterRoles, and a ServiceAccount subject of one needs its namespace.
    const bad = { ...readerBinding, metadata: { name: 'bad' }, roleRef: { ...readerBinding.roleRef, kind: 'Role' }, subjects: [{ kind: 'ServiceAccount', name: 'a' }] };
    const refused = await call('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', 'admin-token', bad);
    expect(refused).toMatchObject({ status: 422, body: { reason: 'Invalid' } });
    expect(refused.body.message).toBe(
      'ClusterRoleBinding "bad" is invalid: roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole", subjects[0].namespace: Required value',
    );
  });

  it('lets the ServiceAccount do what its ClusterRole grants: lists, watches, status updates', async () => {
    expect((await call('GET', '/api/v1/services', 'router-token')).status).toBe(200);
    const watch = await call('GET', '/api/v1/services?watch=true&resourceVersion=0', 'router-token');
    expect(watch).toMatchObject({ status: 200, body: { type: 'ADDED', object: { metadata: { name: 'x' } } } });
    const service = (await call('GET', '/api/v1/namespaces/default/services/x', 'router-token')).body;
    const update = await call('PUT', '/api/v1/namespaces/default/services/x/status', 'router-token', { ...service, status: { loadBalancer: { ingress: [{ ip: '198.51.100.1' }] } } });
    expect(update.status).toBe(200);
  });

  it("answers what it does not grant 403 with kube-apiserver's Status, before any handler runs, watches included", async () => {
    const patch = await call('PATCH', '/api/v1/namespaces/default/services/x/status', 'router-token', { status: {} }, 'application/merge-patch+json');
    expect(patch).toMatchObject({ status: 403 });
    expect(patch.body).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: `services "x" is forbidden: User "${ROUTER}" cannot patch resource "services/status" in API group "" in the namespace "default"`,
      reason: 'Forbidden',
      details: { name: 'x', kind: 'services' },
      code: 403,
    });
    const watch = await call('GET', '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?watch=true', 'router-token');
    expect(watch).toMatchObject({ status: 403, body: { message: `leases.coordination.k8s.io is forbidden: User "${ROUTER}" cannot watch resource "leases" in API group "coordination.k8s.io" in the namespace "kube-system"` } });
    // As kube-apiserver, authorization comes before routing: a resource that does not exist is forbidden too.
    expect((await call('GET', '/api/v1/widgets', 'router-token')).status).toBe(403);
    expect((await call('GET', '/api/v1/widgets', 'admin-token')).status).toBe(404);
    expect(server.requests.filter({ user: ROUTER, forbidden: true }).map((r) => `${r.verb} ${r.resource}${r.subresource ? `/${r.subresource}` : ''}`)).toEqual(
      expect.arrayContaining(['patch services/status', 'watch leases']),
    );
  });

  it('keeps discovery and OpenAPI readable to every authenticated user (system:discovery), and the admin unrestricted', async () => {
    for (const path of ['/api', '/api/v1', '/apis', '/apis/coordination.k8s.io/v1', '/openapi/v3', '/version']) {
      expect((await call('GET', path, 'router-token')).status, path).toBe(200);
    }
    expect((await call('GET', '/apis/coordination.k8s.io/v1/leases', 'admin-token')).status).toBe(200);
    expect((await call('GET', '/api/v1/pods', 'no-such-token')).status).toBe(401);
  });

  it('follows bindings as they change: a RoleBinding grants a ClusterRole in its namespace only, its deletion revokes it', async () => {
    const leases = (namespace: string) => call('GET', `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`, 'router-token');
    expect((await leases('kube-system')).status).toBe(403);
    server.create({ apiVersion: rbac, kind: 'ClusterRole', metadata: { name: 'lease-reader' }, rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['list'] }] });
    const bindingInKubeSystem = {
      apiVersion: rbac,
      kind: 'RoleBinding',
      metadata: { name: 'lease-reader', namespace: 'kube-system' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'lease-reader' },
      subjects: [{ kind: 'ServiceAccount', name: 'kube-router' }],
    };
    server.create(bindingInKubeSystem);
    expect((await leases('kube-system')).status).toBe(200);
    expect((await leases('default')).status).toBe(403);
    server.delete(rbac, 'RoleBinding', 'kube-system', 'lease-reader');
    expect((await leases('kube-system')).status).toBe(403);
  });

  it('is used by client-node through the kubeconfig of a ServiceAccount token, which sees the 403 as from a cluster', async () => {
    const config = new KubeConfig();
    config.loadFromFile(await server.writeKubeconfig(join(dir, 'router.kubeconfig'), { token: 'router-token' }));
    const core = config.makeApiClient(CoreV1Api);
    expect((await core.listServiceForAllNamespaces()).items.map((svc) => svc.metadata?.name)).toContain('x');
    const denied = await core.listPodForAllNamespaces().then(
      () => undefined,
      (error: { code?: number; body?: string }) => error,
    );
    expect(denied?.code).toBe(403);
    expect(JSON.parse(denied?.body ?? '{}')).toMatchObject({ reason: 'Forbidden', message: `pods is forbidden: User "${ROUTER}" cannot list resource "pods" in API group "" at the cluster scope` });
  });

  it.skipIf(!hasKubectl)(`serves kubectl what the role grants and shows it kube-apiserver's Forbidden error otherwise${hasKubectl ? '' : ' (skipped: kubectl is not installed)'}`, async () => {
    const kubeconfig = await server.writeKubeconfig(join(dir, 'kubectl.kubeconfig'), { token: 'router-token' });
    const kubectl = (...args: string[]) =>
      new Promise<{ code: number; output: string }>((resolve) => {
        execFile('kubectl', ['--kubeconfig', kubeconfig, '--cache-dir', join(dir, 'cache'), ...args], { timeout: 20_000 }, (error, stdout, stderr) =>
          resolve({ code: error ? 1 : 0, output: `${stdout}${stderr}` }),
        );
      });
    expect(await kubectl('get', 'services', '-A', '-o', 'name')).toMatchObject({ code: 0, output: expect.stringContaining('service/x') });
    const refused = await kubectl('get', 'leases', '-n', 'kube-system');
    expect(refused.code).toBe(1);
    expect(refused.output).toContain(
      `Error from server (Forbidden): leases.coordination.k8s.io is forbidden: User "${ROUTER}" cannot list resource "leases" in API group "coordination.k8s.io" in the namespace "kube-system"`,
    );
  });
});
