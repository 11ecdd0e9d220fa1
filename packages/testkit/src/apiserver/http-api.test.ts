import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiServer } from './server.js';
import { startApiServer } from './server.js';
import { call } from './testing/http-client.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let server: ApiServer;
const api = <T = Json>(method: string, path: string, body?: unknown, contentType?: string, headers?: Record<string, string>) =>
  call<T>(server.url, method, path, body, contentType, headers);

const pod = (name: string, labels: Record<string, string> = {}, nodeName = 'node-1') => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, labels },
  spec: { nodeName, containers: [{ name: 'app', image: 'app:1', ports: [{ containerPort: 80 }] }] },
});

beforeAll(async () => {
  server = await startApiServer();
  for (const name of ['http-a', 'http-b']) {
    expect((await api('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } })).status).toBe(201);
  }
});
afterAll(() => server.close());

describe('discovery', () => {
  it('serves /version, /api, /apis and resource lists', async () => {
    expect((await api('GET', '/version')).body.major).toBe('1');
    expect((await api('GET', '/api')).body).toMatchObject({ kind: 'APIVersions', versions: ['v1'] });
    const groups = (await api('GET', '/apis')).body.groups.map((g: Json) => g.name);
    expect(groups).toEqual(expect.arrayContaining(['networking.k8s.io', 'discovery.k8s.io', 'coordination.k8s.io', 'events.k8s.io']));
    const core = (await api('GET', '/api/v1')).body;
    expect(core.kind).toBe('APIResourceList');
    const pods = core.resources.find((r: Json) => r.name === 'pods');
    expect(pods).toMatchObject({ kind: 'Pod', namespaced: true, shortNames: ['po'] });
    expect(pods.verbs).toEqual(expect.arrayContaining(['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection']));
    expect(core.resources.map((r: Json) => r.name)).toEqual(expect.arrayContaining(['services/status', 'nodes', 'namespaces']));
    const netpol = (await api('GET', '/apis/networking.k8s.io/v1')).body.resources[0];
    expect(netpol).toMatchObject({ name: 'networkpolicies', shortNames: ['netpol'], kind: 'NetworkPolicy' });
    expect((await api('GET', '/apis/networking.k8s.io')).body.preferredVersion.version).toBe('v1');
  });

  it('answers unknown paths and resources with a NotFound Status', async () => {
    for (const path of ['/apis/apps/v1', '/api/v1/namespaces/default/configmaps', '/openapi/v2', '/api/v1/pods/x/y/z']) {
      const response = await api('GET', path);
      expect(response.status, path).toBe(404);
      expect(response.body).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'NotFound', code: 404 });
    }
  });
});

describe('create, get and list', () => {
  it('creates with server-set metadata and lists with a resourceVersion', async () => {
    const created = await api('POST', '/api/v1/namespaces/http-a/pods', pod('c1', { app: 'web' }));
    expect(created.status).toBe(201);
    const meta = created.body.metadata;
    expect(meta).toMatchObject({ name: 'c1', namespace: 'http-a', generation: 1 });
    expect(meta.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(meta.creationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(Number(meta.resourceVersion)).toBeGreaterThan(0);
    expect(created.body.spec.containers[0].ports[0].protocol).toBe('TCP');

    const got = await api('GET', '/api/v1/namespaces/http-a/pods/c1');
    expect(got.body).toEqual(created.body);

    const list = await api('GET', '/api/v1/namespaces/http-a/pods');
    expect(list.body.kind).toBe('PodList');
    expect(Number(list.body.metadata.resourceVersion)).toBeGreaterThanOrEqual(Number(meta.resourceVersion));
    expect(list.body.items.map((i: Json) => i.metadata.name)).toContain('c1');
    expect(list.body.items[0].kind).toBeUndefined();
  });

  it('refuses duplicates, missing namespaces, bad names and mismatched namespaces', async () => {
    await api('POST', '/api/v1/namespaces/http-a/pods', pod('dup'));
    const duplicate = await api('POST', '/api/v1/namespaces/http-a/pods', pod('dup'));
    expect(duplicate.status).toBe(409);
    expect(duplicate.body).toMatchObject({ reason: 'AlreadyExists', message: 'pods "dup" already exists', details: { name: 'dup', kind: 'pods' } });

    const missingNamespace = await api('POST', '/api/v1/namespaces/nope/pods', pod('x'));
    expect(missingNamespace.status).toBe(404);
    expect(missingNamespace.body.message).toBe('namespaces "nope" not found');

    const badName = await api('POST', '/api/v1/namespaces/http-a/pods', pod('Bad_Name'));
    expect(badName.status).toBe(422);
    expect(badName.body.reason).toBe('Invalid');
    expect(badName.body.details.causes[0].field).toBe('metadata.name');

    const noName = await api('POST', '/api/v1/namespaces/http-a/pods', { apiVersion: 'v1', kind: 'Pod', metadata: {} });
    expect(noName.status).toBe(422);

    const otherNamespace = await api('POST', '/api/v1/namespaces/http-a/pods', { ...pod('y'), metadata: { name: 'y', namespace: 'http-b' } });
    expect(otherNamespace.status).toBe(400);

    const wrongKind = await api('POST', '/api/v1/namespaces/http-a/pods', { ...pod('z'), kind: 'Service' });
    expect(wrongKind.status).toBe(400);

    const notJson = await fetch(`${server.url}/api/v1/namespaces/http-a/pods`, { method: 'POST', body: '{', headers: { 'content-type': 'application/json' } });
    expect(notJson.status).toBe(400);
  });

  it('generates names from generateName', async () => {
    const created = await api('POST', '/api/v1/namespaces/http-a/pods', { ...pod(''), metadata: { generateName: 'gen-' } });
    expect(created.status).toBe(201);
    expect(created.body.metadata.name).toMatch(/^gen-[a-z0-9]{5}$/);
  });

  it('filters lists by label and field selectors, in one namespace or all', async () => {
    await api('POST', '/api/v1/namespaces/http-b/pods', pod('s1', { app: 'db', tier: 'back' }, 'node-1'));
    await api('POST', '/api/v1/namespaces/http-b/pods', pod('s2', { app: 'web', tier: 'front' }, 'node-2'));
    await api('POST', '/api/v1/namespaces/http-b/pods', pod('s3', { app: 'web' }, 'node-1'));
    const names = async (query: string, namespace = 'http-b') => {
      const path = namespace ? `/api/v1/namespaces/${namespace}/pods` : '/api/v1/pods';
      const response = await api('GET', `${path}?${query}`);
      expect(response.status, query).toBe(200);
      return response.body.items.map((i: Json) => `${i.metadata.namespace}/${i.metadata.name}`);
    };
    expect(await names('labelSelector=app%3Dweb')).toEqual(['http-b/s2', 'http-b/s3']);
    expect(await names('labelSelector=app!%3Dweb')).toEqual(['http-b/s1']);
    expect(await names(`labelSelector=${encodeURIComponent('tier in (front,back)')}`)).toEqual(['http-b/s1', 'http-b/s2']);
    expect(await names(`labelSelector=${encodeURIComponent('tier notin (front),app')}`)).toEqual(['http-b/s1', 'http-b/s3']);
    expect(await names('labelSelector=!tier')).toEqual(['http-b/s3']);
    expect(await names('labelSelector=tier')).toEqual(['http-b/s1', 'http-b/s2']);
    expect(await names('fieldSelector=spec.nodeName%3Dnode-1')).toEqual(['http-b/s1', 'http-b/s3']);
    expect(await names('fieldSelector=metadata.name%3Ds2')).toEqual(['http-b/s2']);
    expect(await names('fieldSelector=metadata.namespace%3Dhttp-b,spec.nodeName%3Dnode-2', '')).toEqual(['http-b/s2']);
    const all = await names('labelSelector=', '');
    expect(all).toEqual(expect.arrayContaining(['http-a/c1', 'http-b/s1']));
    expect((await api('GET', '/api/v1/pods?fieldSelector=spec.bogus%3Dx')).status).toBe(400);
    expect((await api('GET', `/api/v1/pods?labelSelector=${encodeURIComponent('a in b')}`)).status).toBe(400);
  });

  it('pages lists with limit and continue', async () => {
    for (const name of ['p1', 'p2', 'p3', 'p4', 'p5']) await api('POST', '/api/v1/namespaces/http-b/pods', pod(name, { page: 'yes' }));
    const seen: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const response = await api('GET', `/api/v1/namespaces/http-b/pods?labelSelector=page&limit=2${token ? `&continue=${token}` : ''}`);
      seen.push(...response.body.items.map((i: Json) => i.metadata.name));
      token = response.body.metadata.continue;
      pages++;
    } while (token);
    expect(seen).toEqual(['p1', 'p2', 'p3', 'p4', 'p5']);
    expect(pages).toBe(3);
    expect((await api('GET', '/api/v1/namespaces/http-b/pods?continue=garbage')).status).toBe(400);

    const first = await api('GET', '/api/v1/namespaces/http-b/pods?limit=1');
    server.create(pod('p6'));
    server.faults.expireResourceVersions();
    const stale = await api('GET', `/api/v1/namespaces/http-b/pods?limit=1&continue=${first.body.metadata.continue}`);
    expect(stale.status).toBe(410);
    expect(stale.body).toMatchObject({ kind: 'Status', reason: 'Expired', code: 410 });
  });

  it('serves meta.k8s.io Tables when asked, as kubectl get does', async () => {
    const accept = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json';
    const table = await api('GET', '/api/v1/namespaces/http-b/pods?labelSelector=app', undefined, undefined, { accept });
    expect(table.body.kind).toBe('Table');
    expect(table.body.columnDefinitions.map((c: Json) => c.name)).toEqual(['Name', 'Ready', 'Status', 'Restarts', 'Age', 'IP', 'Node']);
    expect(table.body.rows[0].cells.slice(0, 3)).toEqual(['s1', '0/1', 'Pending']);
    expect(table.body.rows[0].object).toMatchObject({ kind: 'PartialObjectMetadata', metadata: { name: 's1', namespace: 'http-b' } });
    const single = await api('GET', '/api/v1/namespaces/http-b/pods/s1', undefined, undefined, { accept });
    expect(single.body.rows).toHaveLength(1);
  });
});

describe('update', () => {
  it('replaces with optimistic concurrency: a stale resourceVersion gets 409 Conflict', async () => {
    const created = (await api('POST', '/api/v1/namespaces/http-a/pods', pod('u1'))).body;
    const changed = { ...created, metadata: { ...created.metadata, labels: { v: '2' } } };
    const updated = await api('PUT', '/api/v1/namespaces/http-a/pods/u1', changed);
    expect(updated.status).toBe(200);
    expect(updated.body.metadata.labels).toEqual({ v: '2' });
    expect(Number(updated.body.metadata.resourceVersion)).toBeGreaterThan(Number(created.metadata.resourceVersion));
    expect(updated.body.metadata.generation).toBe(1);

    const stale = await api('PUT', '/api/v1/namespaces/http-a/pods/u1', { ...changed, metadata: { ...changed.metadata, labels: { v: '3' } } });
    expect(stale.status).toBe(409);
    expect(stale.body).toMatchObject({ kind: 'Status', reason: 'Conflict', code: 409, details: { name: 'u1', kind: 'pods' } });
    expect(stale.body.message).toContain('the object has been modified');

    const specChange = { ...updated.body, spec: { ...updated.body.spec, nodeName: 'node-9' } };
    const bumped = await api('PUT', '/api/v1/namespaces/http-a/pods/u1', specChange);
    expect(bumped.body.metadata.generation).toBe(2);
    expect(bumped.body.metadata.uid).toBe(created.metadata.uid);

    const unchanged = await api('PUT', '/api/v1/namespaces/http-a/pods/u1', bumped.body);
    expect(unchanged.body.metadata.resourceVersion).toBe(bumped.body.metadata.resourceVersion);
  });

  it('answers 404 for a missing object and 400 for a name that differs from the URL', async () => {
    expect((await api('PUT', '/api/v1/namespaces/http-a/pods/missing', pod('missing'))).status).toBe(404);
    expect((await api('PUT', '/api/v1/namespaces/http-a/pods/u1', pod('other'))).status).toBe(400);
    expect((await api('POST', '/api/v1/namespaces/http-a/pods/u1', pod('u1'))).body.reason).toBe('MethodNotAllowed');
    expect((await api('PUT', '/api/v1/namespaces/http-a/pods', pod('u1'))).status).toBe(405);
  });

  it('keeps status out of main-resource writes and writes only status through /status', async () => {
    const service = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'lb' },
      spec: { type: 'LoadBalancer', ports: [{ port: 80 }], selector: { app: 'web' } },
    };
    const created = (await api('POST', '/api/v1/namespaces/http-a/services', service)).body;
    expect(created.spec.clusterIP).toMatch(/^10\.(9[6-9]|1[01]\d)\./);
    expect(created.spec.ports[0]).toMatchObject({ protocol: 'TCP', targetPort: 80 });
    expect(created.spec.ports[0].nodePort).toBeGreaterThanOrEqual(30000);

    const ingress = { loadBalancer: { ingress: [{ ip: '192.0.2.10' }] } };
    const ignored = await api('PUT', '/api/v1/namespaces/http-a/services/lb', { ...created, status: ingress });
    expect(ignored.body.status).toEqual({ loadBalancer: {} });

    const statusWrite = await api('PUT', '/api/v1/namespaces/http-a/services/lb/status', {
      ...created,
      spec: { ...created.spec, type: 'ClusterIP' },
      status: ingress,
    });
    expect(statusWrite.status).toBe(200);
    expect(statusWrite.body.status).toEqual(ingress);
    expect(statusWrite.body.spec.type).toBe('LoadBalancer');

    const patched = await api('PATCH', '/api/v1/namespaces/http-a/services/lb/status', { status: { loadBalancer: { ingress: [{ ip: '192.0.2.11' }] } } }, 'application/merge-patch+json');
    expect(patched.body.status.loadBalancer.ingress).toEqual([{ ip: '192.0.2.11' }]);
    expect((await api('GET', '/api/v1/namespaces/http-a/services/lb/status')).body.status).toEqual(patched.body.status);
    expect((await api('GET', '/apis/networking.k8s.io/v1/namespaces/http-a/networkpolicies/x/status')).status).toBe(404);

    const taken = await api('POST', '/api/v1/namespaces/http-a/services', { ...service, metadata: { name: 'lb2' }, spec: { ...service.spec, clusterIP: created.spec.clusterIP } });
    expect(taken.status).toBe(422);
  });
});

describe('patch', () => {
  it('applies JSON merge patches', async () => {
    await api('POST', '/api/v1/namespaces/http-a/pods', pod('m1', { a: '1', b: '2' }));
    const patched = await api('PATCH', '/api/v1/namespaces/http-a/pods/m1', { metadata: { labels: { a: null, c: '3' } } }, 'application/merge-patch+json');
    expect(patched.status).toBe(200);
    expect(patched.body.metadata.labels).toEqual({ b: '2', c: '3' });
  });

  it('applies strategic merge patches with merge keys', async () => {
    await api('POST', '/api/v1/namespaces/http-a/pods', pod('m2'));
    const patched = await api(
      'PATCH',
      '/api/v1/namespaces/http-a/pods/m2',
      { spec: { '$setElementOrder/containers': [{ name: 'side' }, { name: 'app' }], containers: [{ name: 'app', image: 'app:2' }, { name: 'side', image: 'side:1' }] } },
      'application/strategic-merge-patch+json',
    );
    expect(patched.status).toBe(200);
    expect(patched.body.spec.containers).toEqual([
      { name: 'side', image: 'side:1' },
      { name: 'app', image: 'app:2', ports: [{ containerPort: 80, protocol: 'TCP' }] },
    ]);
    expect(patched.body.metadata.generation).toBe(2);
  });

  it('applies JSON patches (the @kubernetes/client-node default)', async () => {
    await api('POST', '/api/v1/namespaces/http-a/pods', pod('m3'));
    const patched = await api('PATCH', '/api/v1/namespaces/http-a/pods/m3', [{ op: 'add', path: '/metadata/labels/x', value: 'y' }], 'application/json-patch+json');
    expect(patched.body.metadata.labels).toEqual({ x: 'y' });
    const failed = await api('PATCH', '/api/v1/namespaces/http-a/pods/m3', [{ op: 'test', path: '/metadata/labels/x', value: 'z' }], 'application/json-patch+json');
    expect(failed.status).toBe(422);
  });

  it('treats a resourceVersion in the patch as a precondition and rejects unknown patch types', async () => {
    const created = (await api('POST', '/api/v1/namespaces/http-a/pods', pod('m4'))).body;
    await api('PATCH', '/api/v1/namespaces/http-a/pods/m4', { metadata: { labels: { n: '1' } } }, 'application/merge-patch+json');
    const stale = await api('PATCH', '/api/v1/namespaces/http-a/pods/m4', { metadata: { resourceVersion: created.metadata.resourceVersion, labels: { n: '2' } } }, 'application/merge-patch+json');
    expect(stale.status).toBe(409);
    expect((await api('PATCH', '/api/v1/namespaces/http-a/pods/m4', {}, 'application/apply-patch+yaml')).status).toBe(415);
    expect((await api('PATCH', '/api/v1/namespaces/http-a/pods/nope', {}, 'application/merge-patch+json')).status).toBe(404);
  });
});

describe('delete', () => {
  it('deletes one object and answers 404 afterwards', async () => {
    await api('POST', '/api/v1/namespaces/http-a/pods', pod('d1'));
    const deleted = await api('DELETE', '/api/v1/namespaces/http-a/pods/d1', { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Background' });
    expect(deleted.status).toBe(200);
    expect(deleted.body.metadata.name).toBe('d1');
    expect((await api('GET', '/api/v1/namespaces/http-a/pods/d1')).status).toBe(404);
    expect((await api('DELETE', '/api/v1/namespaces/http-a/pods/d1')).body.reason).toBe('NotFound');
  });

  it('honours delete preconditions and dry runs', async () => {
    await api('POST', '/api/v1/namespaces/http-a/pods', pod('d2'));
    expect((await api('DELETE', '/api/v1/namespaces/http-a/pods/d2', { preconditions: { uid: 'not-it' } })).status).toBe(409);
    expect((await api('DELETE', '/api/v1/namespaces/http-a/pods/d2?dryRun=All')).status).toBe(200);
    expect((await api('GET', '/api/v1/namespaces/http-a/pods/d2')).status).toBe(200);
    expect((await api('POST', '/api/v1/namespaces/http-a/pods?dryRun=All', pod('dry'))).status).toBe(201);
    expect((await api('GET', '/api/v1/namespaces/http-a/pods/dry')).status).toBe(404);
  });

  it('deletes collections by selector', async () => {
    await api('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'http-c' } });
    for (const [name, app] of [['k1', 'web'], ['k2', 'web'], ['k3', 'db']] as const) {
      await api('POST', '/api/v1/namespaces/http-c/pods', pod(name, { app }));
    }
    const deleted = await api('DELETE', '/api/v1/namespaces/http-c/pods?labelSelector=app%3Dweb');
    expect(deleted.status).toBe(200);
    expect(deleted.body.items.map((i: Json) => i.metadata.name)).toEqual(['k1', 'k2']);
    expect((await api('GET', '/api/v1/namespaces/http-c/pods')).body.items.map((i: Json) => i.metadata.name)).toEqual(['k3']);
    await api('DELETE', '/api/v1/namespaces/http-c/pods');
    expect((await api('GET', '/api/v1/namespaces/http-c/pods')).body.items).toEqual([]);
  });

  it('deletes a namespace with everything in it and protects the system namespaces', async () => {
    await api('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'http-gone' } });
    await api('POST', '/api/v1/namespaces/http-gone/pods', pod('inside'));
    await api('POST', '/apis/networking.k8s.io/v1/namespaces/http-gone/networkpolicies', {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'np' },
      spec: { podSelector: {} },
    });
    expect((await api('DELETE', '/api/v1/namespaces/http-gone')).status).toBe(200);
    expect((await api('GET', '/api/v1/namespaces/http-gone/pods/inside')).status).toBe(404);
    expect((await api('GET', '/apis/networking.k8s.io/v1/namespaces/http-gone/networkpolicies')).body.items).toEqual([]);
    const forbidden = await api('DELETE', '/api/v1/namespaces/default');
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.reason).toBe('Forbidden');
  });
});

describe('other resources', () => {
  it('serves every resource of the issue', async () => {
    const objects: [string, Json][] = [
      ['/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-1' }, spec: { podCIDR: '10.244.1.0/24' } }],
      ['/apis/discovery.k8s.io/v1/namespaces/http-a/endpointslices', { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: { name: 'web-abc', labels: { 'kubernetes.io/service-name': 'web' } }, addressType: 'IPv4', endpoints: [{ addresses: ['10.0.0.1'] }], ports: [{ port: 80 }] }],
      ['/apis/networking.k8s.io/v1/namespaces/http-a/networkpolicies', { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name: 'np' }, spec: { podSelector: {}, ingress: [{ ports: [{ port: 80 }] }] } }],
      ['/apis/coordination.k8s.io/v1/namespaces/http-a/leases', { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'leader' }, spec: { holderIdentity: 'me', leaseDurationSeconds: 15 } }],
      ['/api/v1/namespaces/http-a/events', { apiVersion: 'v1', kind: 'Event', metadata: { name: 'e1' }, involvedObject: { kind: 'Pod', name: 'c1', namespace: 'http-a' }, reason: 'Started', message: 'hello', type: 'Normal' }],
    ];
    for (const [path, obj] of objects) {
      const created = await api('POST', path, obj);
      expect(created.status, path).toBe(201);
      expect((await api('GET', `${path}/${obj.metadata.name}`)).body.metadata.uid).toBe(created.body.metadata.uid);
    }
    const policy = (await api('GET', '/apis/networking.k8s.io/v1/namespaces/http-a/networkpolicies/np')).body;
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    expect(policy.spec.ingress[0].ports[0].protocol).toBe('TCP');
    expect((await api('POST', '/api/v1/namespaces/http-a/nodes', objects[0]![1])).status).toBe(404);

    const asEventsV1 = (await api('GET', '/apis/events.k8s.io/v1/namespaces/http-a/events/e1')).body;
    expect(asEventsV1).toMatchObject({ apiVersion: 'events.k8s.io/v1', note: 'hello', regarding: { name: 'c1' } });
    expect(asEventsV1.message).toBeUndefined();
    const byRegarding = await api('GET', '/apis/events.k8s.io/v1/events?fieldSelector=regarding.name%3Dc1');
    expect(byRegarding.body.items).toHaveLength(1);
    const byInvolved = await api('GET', '/api/v1/events?fieldSelector=involvedObject.name%3Dc1');
    expect(byInvolved.body.items).toHaveLength(1);
  });

  it('exposes the same store programmatically', async () => {
    const created = server.create({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'prog', namespace: 'http-a', labels: { via: 'api' } }, spec: { containers: [] } });
    expect((await api('GET', '/api/v1/namespaces/http-a/pods/prog')).body.metadata.uid).toBe(created.metadata.uid);
    expect(server.list('v1', 'Pod', 'http-a', { labelSelector: 'via=api' }).map((p) => p.metadata.name)).toEqual(['prog']);
    expect(server.get('v1', 'Pod', 'http-a', 'nope')).toBeUndefined();
    server.patchStatus('v1', 'Pod', 'http-a', 'prog', { status: { podIP: '10.244.0.5' } });
    expect(server.get('v1', 'Pod', 'http-a', 'prog')?.status).toEqual({ phase: 'Pending', podIP: '10.244.0.5' });
    expect(() => server.update(created)).toThrow(/modified/);
    const current = server.get('v1', 'Pod', 'http-a', 'prog')!;
    const updated = server.update({ ...current, metadata: { ...current.metadata, labels: { via: 'update' } } });
    expect(updated.metadata.labels).toEqual({ via: 'update' });
    server.delete('v1', 'Pod', 'http-a', 'prog');
    expect((await api('GET', '/api/v1/namespaces/http-a/pods/prog')).status).toBe(404);
    expect(server.requests.count({ verb: 'get', resource: 'pods', name: 'prog' })).toBe(2);
  });

  it('writes a kubeconfig to a temporary file that close() removes', async () => {
    const other = await startApiServer();
    const path = await other.writeKubeconfig();
    const config = parse(await readFile(path, 'utf8')) as Json;
    expect(config.clusters[0].cluster).toEqual({ server: other.url, 'insecure-skip-tls-verify': true });
    expect(config.contexts[0]).toMatchObject({ name: 'embedded', context: { cluster: 'embedded', namespace: 'default' } });
    expect(config['current-context']).toBe('embedded');
    expect(other.kubeconfigYaml()).toBe(await readFile(path, 'utf8'));
    await other.close();
    expect(existsSync(path)).toBe(false);
  });
});
