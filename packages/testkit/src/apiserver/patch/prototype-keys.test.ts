// Issue 35: patches along `__proto__` or `constructor` reached Object.prototype of the server's process.
import { afterEach, describe, expect, it } from 'vitest';
import { ApiError } from '../errors.js';
import { startApiServer } from '../server.js';
import { call } from '../testing/http-client.js';
import type { KubeObject } from '../kube-object.js';
import type { PatchType } from './apply-patch.js';
import { applyPatch } from './apply-patch.js';
import { applyJsonMergePatch } from './json-merge-patch.js';
import { applyStrategicMergePatch } from './strategic-merge-patch.js';
import { listStrategyFor } from './strategic-merge-keys.js';

const pod: KubeObject = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'p', labels: { app: 'web' } },
  spec: { containers: [{ name: 'app', image: 'app:1' }] },
};

const planted = ['namespace', 'polluted', 'injected'];
const prototypes = [Object.prototype, Array.prototype, Function.prototype] as unknown as Record<string, unknown>[];

function pollution(): string[] {
  return prototypes.flatMap((prototype) => planted.filter((key) => Object.hasOwn(prototype, key)));
}

afterEach(() => {
  // Without the fix these tests plant properties; later tests in this worker must not inherit them.
  for (const prototype of prototypes) for (const key of planted) delete prototype[key];
});

const hostilePatches: [string, PatchType, unknown][] = [
  ['a JSON patch to /__proto__/namespace', 'json', [{ op: 'add', path: '/__proto__/namespace', value: 'x' }]],
  ['a JSON patch to /metadata/__proto__/polluted', 'json', [{ op: 'add', path: '/metadata/__proto__/polluted', value: 'x' }]],
  ['a JSON patch replacing /__proto__', 'json', [{ op: 'add', path: '/__proto__', value: { polluted: 'x' } }]],
  ['a JSON patch to /constructor/prototype/polluted', 'json', [{ op: 'add', path: '/constructor/prototype/polluted', value: 'x' }]],
  ['a JSON patch to /spec/containers/constructor/prototype/injected', 'json', [{ op: 'add', path: '/spec/containers/constructor/prototype/injected', value: 'x' }]],
  ['a JSON patch whose value has a __proto__ key', 'json', JSON.parse('[{"op":"add","path":"/spec/x","value":{"__proto__":{"polluted":"x"}}}]')],
  ['a merge patch with a __proto__ key', 'merge', JSON.parse('{"metadata":{"__proto__":{"polluted":"x"}}}')],
  ['a strategic merge patch with a __proto__ key', 'strategic', JSON.parse('{"spec":{"__proto__":{"polluted":"x"}}}')],
  ['a strategic merge patch with a __proto__ key in a merged list', 'strategic', JSON.parse('{"spec":{"containers":[{"name":"app","__proto__":{"injected":"x"}}]}}')],
];

describe('patches that name a prototype', () => {
  it.each(hostilePatches)('refuse %s with a 4xx Status and leave every prototype alone', (_what, type, patch) => {
    let error: unknown;
    try {
      applyPatch(pod, type, patch);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ApiError);
    const status = (error as ApiError).toStatus();
    expect([400, 422]).toContain(status.code);
    expect(status.message).toMatch(/__proto__|constructor|does not exist/);
    expect(pollution()).toEqual([]);
  });

  it('patch constructor and prototype as ordinary fields, never through the prototype chain', () => {
    const merged = applyPatch(pod, 'merge', { metadata: { labels: { constructor: 'a', prototype: 'b' } } });
    expect(merged.metadata.labels).toEqual({ app: 'web', constructor: 'a', prototype: 'b' });
    const strategic = applyPatch(pod, 'strategic', { metadata: { labels: { constructor: 'a' } }, '$setElementOrder/constructor': [{ name: 'x' }] });
    expect(strategic.metadata.labels).toEqual({ app: 'web', constructor: 'a' });
    expect(Object.hasOwn(strategic, 'constructor')).toBe(false);
    const json = applyPatch(pod, 'json', [{ op: 'add', path: '/metadata/labels/constructor', value: 'a' }]);
    expect(json.metadata.labels).toEqual({ app: 'web', constructor: 'a' });
    expect(() => structuredClone(strategic)).not.toThrow();
  });

  it('keep a __proto__ key a data field even when the patch functions are called directly', () => {
    const hostile = JSON.parse('{"__proto__":{"polluted":"x"},"a":{"__proto__":{"injected":"y"}}}') as Record<string, unknown>;
    const merged = applyJsonMergePatch({}, hostile) as Record<string, unknown>;
    const strategic = applyStrategicMergePatch({}, hostile, () => undefined) as Record<string, unknown>;
    for (const result of [merged, strategic]) {
      expect(Object.getPrototypeOf(result)).toBe(Object.prototype);
      expect(Object.getPrototypeOf(result.a)).toBe(Object.prototype);
      expect((result as { polluted?: unknown }).polluted).toBeUndefined();
    }
    expect(pollution()).toEqual([]);
  });

  it('finds no list strategy on the prototype chain', () => {
    expect(listStrategyFor('Pod', ['constructor'])).toBeUndefined();
    expect(listStrategyFor('toString', ['spec', 'containers'])).toBeUndefined();
  });
});

describe('over HTTP', () => {
  it('answers a JSON patch to /__proto__/namespace and a create with a __proto__ key with a Status, and stores neither', async () => {
    const server = await startApiServer({ seed: [{ ...pod, metadata: { name: 'p', namespace: 'default' } }] });
    try {
      const path = '/api/v1/namespaces/default/pods/p';
      const patched = await call(server.url, 'PATCH', path, [{ op: 'add', path: '/__proto__/namespace', value: 'x' }], 'application/json-patch+json');
      expect(patched.status).toBe(422);
      expect(patched.body).toMatchObject({ kind: 'Status', reason: 'Invalid', code: 422, message: expect.stringContaining('/__proto__/namespace') });
      const created = await call(server.url, 'POST', '/api/v1/namespaces/default/pods', JSON.parse('{"metadata":{"name":"q","__proto__":{"polluted":"x"}},"spec":{"containers":[{"name":"a","image":"b"}]}}'));
      expect(created.status).toBe(400);
      expect(created.body.message).toContain('unknown field "metadata.__proto__"');
      expect(server.get('v1', 'Pod', 'default', 'q')).toBeUndefined();
      expect(pollution()).toEqual([]);
    } finally {
      await server.close();
    }
  });
});
