import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ApiServer } from './server.js';
import { startApiServer } from './server.js';
import { call, eventually, WatchClient } from './testing/http-client.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let server: ApiServer;
const openWatches: WatchClient[] = [];

async function watch(path: string, headers?: Record<string, string>): Promise<WatchClient> {
  const client = await WatchClient.open(`${server.url}${path}`, headers);
  openWatches.push(client);
  return client;
}

const pod = (name: string, labels: Record<string, string> = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'watched', labels },
  spec: { containers: [{ name: 'app', image: 'app:1' }] },
});

beforeAll(async () => {
  server = await startApiServer({ bookmarkIntervalMs: 100, historyLimit: 50 });
  server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'watched' } });
});
afterEach(() => {
  for (const client of openWatches.splice(0)) client.close();
  server.faults.reset();
});
afterAll(() => server.close());

describe('watch', () => {
  it('streams ADDED, MODIFIED and DELETED after the listed resourceVersion', async () => {
    server.create(pod('before'));
    const list = await call<Json>(server.url, 'GET', '/api/v1/namespaces/watched/pods');
    const rv = list.body.metadata.resourceVersion;
    const stream = await watch(`/api/v1/namespaces/watched/pods?watch=true&resourceVersion=${rv}`);
    expect(stream.status).toBe(200);

    const created = await call<Json>(server.url, 'POST', '/api/v1/namespaces/watched/pods', pod('w1'));
    await call(server.url, 'PATCH', '/api/v1/namespaces/watched/pods/w1', { metadata: { labels: { x: 'y' } } }, 'application/merge-patch+json');
    await call(server.url, 'DELETE', '/api/v1/namespaces/watched/pods/w1');

    const added = await stream.next();
    expect(added).toMatchObject({ type: 'ADDED', object: { kind: 'Pod', apiVersion: 'v1', metadata: { name: 'w1' } } });
    expect(added.object.metadata!.resourceVersion).toBe(created.body.metadata.resourceVersion);
    const modified = await stream.next();
    expect(modified).toMatchObject({ type: 'MODIFIED', object: { metadata: { name: 'w1', labels: { x: 'y' } } } });
    const deleted = await stream.next();
    expect(deleted.type).toBe('DELETED');
    expect(Number(deleted.object.metadata!.resourceVersion)).toBeGreaterThan(Number(modified.object.metadata!.resourceVersion));
  });

  it('replays the current state first when no resourceVersion is given, and resumes from history', async () => {
    const fresh = await watch('/api/v1/namespaces/watched/pods?watch=1&fieldSelector=metadata.name%3Dbefore');
    expect(await fresh.next()).toMatchObject({ type: 'ADDED', object: { metadata: { name: 'before' } } });

    const rv = server.resourceVersion;
    server.create(pod('r1'));
    server.create(pod('r2'));
    const resumed = await watch(`/api/v1/namespaces/watched/pods?watch=1&resourceVersion=${rv}`);
    expect((await resumed.next()).object.metadata!.name).toBe('r1');
    expect((await resumed.next()).object.metadata!.name).toBe('r2');
  });

  it('reports objects entering and leaving a label selector as ADDED and DELETED', async () => {
    server.create(pod('sel', { role: 'a' }));
    const stream = await watch(`/api/v1/namespaces/watched/pods?watch=1&labelSelector=role%3Db&resourceVersion=${server.resourceVersion}`);
    server.patch('v1', 'Pod', 'watched', 'sel', { metadata: { labels: { role: 'b' } } });
    server.patch('v1', 'Pod', 'watched', 'sel', { metadata: { labels: { role: 'b', more: '1' } } });
    server.patch('v1', 'Pod', 'watched', 'sel', { metadata: { labels: { role: 'c' } } });
    expect((await stream.next()).type).toBe('ADDED');
    expect((await stream.next()).type).toBe('MODIFIED');
    expect((await stream.next()).type).toBe('DELETED');
  });

  it('watches all namespaces and cluster-scoped resources', async () => {
    const nodes = await watch(`/api/v1/nodes?watch=1&resourceVersion=${server.resourceVersion}`);
    const allPods = await watch(`/api/v1/pods?watch=1&resourceVersion=${server.resourceVersion}`);
    server.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1' } });
    server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'watched-2' } });
    server.create({ ...pod('elsewhere'), metadata: { name: 'elsewhere', namespace: 'watched-2' } });
    expect(await nodes.next()).toMatchObject({ type: 'ADDED', object: { kind: 'Node', metadata: { name: 'n1' } } });
    expect(await allPods.next()).toMatchObject({ type: 'ADDED', object: { metadata: { name: 'elsewhere', namespace: 'watched-2' } } });
  });

  it('answers a resume point older than the history with an ERROR event carrying a 410 Expired Status', async () => {
    const old = server.resourceVersion;
    server.create(pod('e1'));
    server.faults.expireResourceVersions();
    const stream = await watch(`/api/v1/namespaces/watched/pods?watch=1&resourceVersion=${old}`);
    expect(stream.status).toBe(200);
    const event = await stream.next();
    expect(event.type).toBe('ERROR');
    expect(event.object).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'Expired', code: 410 });
    await stream.ended;
    expect(stream.isEnded).toBe(true);

    const current = await watch(`/api/v1/namespaces/watched/pods?watch=1&resourceVersion=${server.resourceVersion}`);
    server.create(pod('e2'));
    expect((await current.next()).type).toBe('ADDED');
  });

  it('expires resume points that fell out of the bounded history window', async () => {
    const old = server.resourceVersion;
    for (let i = 0; i < 60; i++) server.create(pod(`flood-${i}`));
    const stream = await watch(`/api/v1/namespaces/watched/pods?watch=1&resourceVersion=${old}`);
    expect((await stream.next()).object.code).toBe(410);
  });

  it('sends bookmarks with the current resourceVersion when allowed', async () => {
    const stream = await watch(`/api/v1/namespaces/watched/pods?watch=1&allowWatchBookmarks=true&resourceVersion=${server.resourceVersion}`);
    server.create(pod('b1'));
    const bookmark = await eventually(async () => {
      const event = await stream.next({ bookmarks: true });
      return event.type === 'BOOKMARK' ? event : undefined;
    });
    expect(bookmark.object).toEqual({ kind: 'Pod', apiVersion: 'v1', metadata: { resourceVersion: server.resourceVersion } });
    const plain = await watch(`/api/v1/namespaces/watched/pods?watch=1&resourceVersion=${server.resourceVersion}`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(plain.events).toEqual([]);
  });

  it('ends the initial state with an initial-events-end bookmark for sendInitialEvents', async () => {
    const stream = await watch('/api/v1/namespaces/watched/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&fieldSelector=metadata.name%3Dbefore');
    expect((await stream.next()).type).toBe('ADDED');
    const end = await stream.next({ bookmarks: true });
    expect(end.type).toBe('BOOKMARK');
    expect(end.object.metadata!.annotations).toEqual({ 'k8s.io/initial-events-end': 'true' });
  });

  it('ends the stream after timeoutSeconds', async () => {
    const started = Date.now();
    const stream = await watch(`/api/v1/namespaces/watched/pods?watch=1&timeoutSeconds=1&resourceVersion=${server.resourceVersion}`);
    await stream.ended;
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });

  it('rejects a malformed resourceVersion with 400', async () => {
    const response = await call<Json>(server.url, 'GET', '/api/v1/pods?watch=1&resourceVersion=abc');
    expect(response.status).toBe(400);
  });
});

describe('fault injection', () => {
  it('fails the next watch of a resource with the given status, then recovers', async () => {
    server.faults.failNextWatch('pods', 500);
    const failed = await call<Json>(server.url, 'GET', '/api/v1/pods?watch=1');
    expect(failed.status).toBe(500);
    expect(failed.body).toMatchObject({ kind: 'Status', code: 500, reason: 'InternalError' });
    expect((await call(server.url, 'GET', '/api/v1/pods')).status).toBe(200);
    const services = await watch('/api/v1/services?watch=1');
    expect(services.status).toBe(200);
    const pods = await watch(`/api/v1/pods?watch=1&resourceVersion=${server.resourceVersion}`);
    expect(pods.status).toBe(200);
  });

  it('fails any verb on demand', async () => {
    server.faults.failNextRequest('list', 'nodes', 503, 2);
    expect((await call(server.url, 'GET', '/api/v1/nodes')).status).toBe(503);
    expect((await call(server.url, 'GET', '/api/v1/nodes')).status).toBe(503);
    expect((await call(server.url, 'GET', '/api/v1/nodes')).status).toBe(200);
  });

  it('closes open watches, all or per resource', async () => {
    const pods = await watch(`/api/v1/pods?watch=1&resourceVersion=${server.resourceVersion}`);
    const nodes = await watch(`/api/v1/nodes?watch=1&resourceVersion=${server.resourceVersion}`);
    await eventually(() => server.openWatches('pods') === 1 && server.openWatches('nodes') === 1);
    expect(server.faults.closeWatches('pods')).toBe(1);
    await pods.ended;
    expect(nodes.isEnded).toBe(false);
    expect(server.faults.closeWatches()).toBe(1);
    await nodes.ended;
    expect(server.openWatches()).toBe(0);
  });

  it('adds latency to every response', async () => {
    const fast = Date.now();
    await call(server.url, 'GET', '/api/v1/namespaces');
    const baseline = Date.now() - fast;
    server.faults.setLatency(300);
    const slow = Date.now();
    await call(server.url, 'GET', '/api/v1/namespaces');
    expect(Date.now() - slow).toBeGreaterThanOrEqual(290);
    expect(baseline).toBeLessThan(290);
  });

  it('counts requests by verb and resource', async () => {
    server.requests.clear();
    await call(server.url, 'GET', '/api/v1/namespaces/watched/pods');
    const stream = await watch(`/api/v1/namespaces/watched/pods?watch=1&resourceVersion=${server.resourceVersion}`);
    expect(stream.status).toBe(200);
    expect(server.requests.count({ verb: 'list', resource: 'pods' })).toBe(1);
    expect(server.requests.count({ verb: 'watch', resource: 'pods', namespace: 'watched' })).toBe(1);
    expect(server.requests.count({ resource: 'nodes' })).toBe(0);
  });
});
