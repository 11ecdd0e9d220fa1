// Issue 35: deep JSON bodies were answered 500, and about 900 nested YAML brackets could end the server's process.
// Bodies too deep or too large are answered 400 and 413 with a Status, and the server keeps serving.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiServer } from './server.js';
import { startApiServer } from './server.js';
import { call } from './testing/http-client.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let server: ApiServer;
const PODS = '/api/v1/namespaces/default/pods';

beforeAll(async () => {
  server = await startApiServer();
});
afterAll(() => server.close());

async function send(method: string, path: string, body: string, contentType: string): Promise<{ status: number; body: Json }> {
  const response = await fetch(`${server.url}${path}`, { method, headers: { 'content-type': contentType, accept: 'application/json' }, body });
  return { status: response.status, body: (await response.json()) as Json };
}

/** A Pod whose unknown field `spec.x` nests `depth - 2` arrays: the body nests `depth` levels in all. */
function podNesting(name: string, depth: number): string {
  const inner = depth - 2;
  return `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"${name}"},"spec":{"containers":[{"name":"a","image":"b"}],"x":${'['.repeat(inner)}${']'.repeat(inner)}}}`;
}

const nestedMaps = (levels: number) => Array.from({ length: levels }, (_, i) => `${' '.repeat(i)}k:`).join('\n') + ' v\n';

function expectStatus(response: { status: number; body: Json }, code: number, reason: string, message: string | RegExp): void {
  expect(response.status, JSON.stringify(response.body).slice(0, 300)).toBe(code);
  expect(response.body).toMatchObject({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason, code });
  expect(response.body.message).toMatch(message);
}

async function expectServing(): Promise<void> {
  expect((await call(server.url, 'GET', '/version')).status).toBe(200);
  const name = `normal-${Math.random().toString(36).slice(2, 8)}`;
  const created = await call(server.url, 'POST', PODS, { apiVersion: 'v1', kind: 'Pod', metadata: { name }, spec: { containers: [{ name: 'a', image: 'b' }] } });
  expect(created.status).toBe(201);
}

const tooDeep = /exceeded max depth of 200/;

describe('request bodies nested too deeply', () => {
  it.each([
    ['JSON of 10,000 nested arrays', '['.repeat(10_000) + ']'.repeat(10_000), 'application/json'],
    ['a Pod whose spec nests 10,000 levels', podNesting('deep-json', 10_000), 'application/json'],
    ['YAML of 900 nested brackets', 'a: ' + '['.repeat(900) + ']'.repeat(900), 'application/yaml'],
    ['YAML of 100,000 nested brackets', '['.repeat(100_000), 'application/yaml'],
    ['YAML of 300 nested block maps', nestedMaps(300), 'application/yaml'],
  ])('answers %s with 400 before parsing it, and keeps serving', async (_what, body, contentType) => {
    expectStatus(await send('POST', PODS, body, contentType), 400, 'BadRequest', tooDeep);
    await expectServing();
  });

  it('answers deep patches of every type with 400', async () => {
    await expectServing();
    const [pod] = server.list('v1', 'Pod', 'default');
    const path = `${PODS}/${pod?.metadata.name}`;
    const deep = '['.repeat(5_000) + ']'.repeat(5_000);
    for (const [contentType, body] of [
      ['application/merge-patch+json', `{"metadata":{"labels":${deep}}}`],
      ['application/strategic-merge-patch+json', `{"spec":{"x":${deep}}}`],
      ['application/json-patch+json', `[{"op":"add","path":"/spec/x","value":${deep}}]`],
    ]) {
      expectStatus(await send('PATCH', path, body as string, contentType as string), 400, 'BadRequest', tooDeep);
    }
    await expectServing();
  });

  it('stores a body of exactly 200 levels and refuses 201', async () => {
    expect((await send('POST', PODS, podNesting('depth-200', 200), 'application/json')).status).toBe(201);
    expectStatus(await send('POST', PODS, podNesting('depth-201', 201), 'application/json'), 400, 'BadRequest', tooDeep);
  });
});

describe('request bodies over 3 MiB', () => {
  it('answers 413 RequestEntityTooLarge, and keeps serving', async () => {
    const padding = 'x'.repeat(3 * 1024 * 1024);
    const body = JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'huge' }, spec: { containers: [{ name: 'a', image: padding }] } });
    expectStatus(await send('POST', PODS, body, 'application/json'), 413, 'RequestEntityTooLarge', 'Request entity too large: limit is 3145728');
    await expectServing();
  });
});
