import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiServer } from '../server.js';
import { startApiServer } from '../server.js';
import { call } from '../testing/http-client.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let server: ApiServer;
const api = (path: string, headers?: Record<string, string>) => call<Json>(server.url, 'GET', path, undefined, undefined, headers);
const NAMESPACE = 'list-pages';
const pod = (name: string, labels: Record<string, string> = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: NAMESPACE, labels },
  spec: { containers: [{ name: 'app', image: 'app:1' }] },
});
const name = (i: number) => `p-${String(i).padStart(3, '0')}`;

/** Every page of `path`, with `between` run after each one. */
async function pages(path: string, between: (page: number) => void = () => {}): Promise<Json[]> {
  const bodies: Json[] = [];
  let token: string | undefined;
  do {
    const response = await api(`${path}${token ? `&continue=${encodeURIComponent(token)}` : ''}`);
    expect(response.status).toBe(200);
    bodies.push(response.body);
    token = response.body.metadata.continue;
    between(bodies.length);
  } while (token);
  return bodies;
}

beforeAll(async () => {
  server = await startApiServer({ validation: false });
  server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } });
  for (let i = 0; i < 100; i++) server.create(pod(name(i), { tier: i % 10 === 0 ? 'edge' : 'web' }));
});
afterAll(() => server.close());

describe('list pages over HTTP', () => {
  it('serves an informer paging through changes the list as it was at its first page', async () => {
    const before = (await api(`/api/v1/namespaces/${NAMESPACE}/pods`)).body;
    const bodies = await pages(`/api/v1/namespaces/${NAMESPACE}/pods?limit=30`, (page) => {
      if (page > 3) return;
      server.delete('v1', 'Pod', NAMESPACE, name(30 * page + 5));
      server.create(pod(`${name(30 * page + 5)}-new`));
      server.patch('v1', 'Pod', NAMESPACE, name(30 * page + 7), { metadata: { labels: { tier: 'moved' } } });
    });
    expect(bodies.flatMap((body) => body.items)).toEqual(before.items);
    expect(bodies.map((body) => body.metadata.resourceVersion)).toEqual(bodies.map(() => before.metadata.resourceVersion));
    expect(bodies.map((body) => body.metadata.remainingItemCount)).toEqual([70, 40, 10, undefined]);
    const after = (await api(`/api/v1/namespaces/${NAMESPACE}/pods`)).body.items.map((obj: Json) => obj.metadata.name);
    expect(after).toContain(`${name(35)}-new`);
    expect(after).not.toContain(name(35));
  });

  it('leaves remainingItemCount out with a selector, as kube-apiserver does', async () => {
    const bodies = await pages(`/api/v1/namespaces/${NAMESPACE}/pods?limit=4&labelSelector=tier%3Dedge`);
    const names = bodies.flatMap((body) => body.items.map((obj: Json) => obj.metadata.name));
    expect(names).toEqual([0, 10, 20, 30, 40, 50, 60, 70, 80, 90].map(name));
    expect(bodies.every((body) => body.metadata.remainingItemCount === undefined)).toBe(true);
  });

  it('pages Tables as kubectl get asks for them', async () => {
    const accept = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json';
    const first = await api(`/api/v1/namespaces/${NAMESPACE}/pods?limit=10`, { accept });
    expect(first.body.kind).toBe('Table');
    expect(first.body.rows).toHaveLength(10);
    const second = await api(`/api/v1/namespaces/${NAMESPACE}/pods?limit=10&continue=${encodeURIComponent(first.body.metadata.continue)}`, { accept });
    expect(second.body.rows.map((row: Json) => row.cells[0])).toEqual(Array.from({ length: 10 }, (_, i) => name(10 + i)));
  });

  it('refuses a token that is not one with 400, and one older than the history with 410', async () => {
    expect((await api(`/api/v1/namespaces/${NAMESPACE}/pods?limit=1&continue=garbage`)).status).toBe(400);
    const forged = Buffer.from(JSON.stringify({ rv: -1, start: 'x' })).toString('base64url');
    expect((await api(`/api/v1/namespaces/${NAMESPACE}/pods?limit=1&continue=${forged}`)).status).toBe(400);
    const first = await api(`/api/v1/namespaces/${NAMESPACE}/pods?limit=1`);
    server.create(pod('expire-me'));
    server.faults.expireResourceVersions();
    const stale = await api(`/api/v1/namespaces/${NAMESPACE}/pods?limit=1&continue=${encodeURIComponent(first.body.metadata.continue)}`);
    expect(stale.status).toBe(410);
    expect(stale.body).toMatchObject({ kind: 'Status', reason: 'Expired', code: 410 });
  });
});
