import { describe, expect, it } from 'vitest';
import { ApiError } from '../errors.js';
import type { KubeObject } from '../kube-object.js';
import { applyPatch } from './apply-patch.js';
import { applyJsonMergePatch } from './json-merge-patch.js';
import { applyJsonPatch } from './json-patch.js';

const pod: KubeObject = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'p', labels: { app: 'web', tier: 'front' }, finalizers: ['a'] },
  spec: {
    containers: [
      { name: 'app', image: 'app:1', ports: [{ containerPort: 80, protocol: 'TCP' }], env: [{ name: 'A', value: '1' }] },
      { name: 'sidecar', image: 'side:1' },
    ],
    volumes: [{ name: 'data', emptyDir: {} }],
    tolerations: [{ key: 'a' }, { key: 'b' }],
  },
};

describe('JSON merge patch (RFC 7386)', () => {
  it('merges maps, deletes on null and replaces lists', () => {
    expect(applyJsonMergePatch({ a: { b: 1, c: 2 }, l: [1, 2] }, { a: { b: null, d: 3 }, l: [3] })).toEqual({ a: { c: 2, d: 3 }, l: [3] });
    expect(applyJsonMergePatch({ a: 1 }, { a: { b: 1 } })).toEqual({ a: { b: 1 } });
  });
});

describe('JSON patch (RFC 6902)', () => {
  it('applies add, remove, replace, move, copy and test', () => {
    const doc = { a: { b: [1, 2] }, 'x/y': 1, c: 'v' };
    const result = applyJsonPatch(doc, [
      { op: 'test', path: '/c', value: 'v' },
      { op: 'add', path: '/a/b/-', value: 3 },
      { op: 'add', path: '/a/b/0', value: 0 },
      { op: 'remove', path: '/x~1y' },
      { op: 'replace', path: '/c', value: 'w' },
      { op: 'copy', from: '/c', path: '/d' },
      { op: 'move', from: '/d', path: '/e' },
    ]);
    expect(result).toEqual({ a: { b: [0, 1, 2, 3] }, c: 'w', e: 'w' });
    expect(doc).toEqual({ a: { b: [1, 2] }, 'x/y': 1, c: 'v' });
  });

  it('fails a test operation and a missing path with 422', () => {
    for (const patch of [[{ op: 'test', path: '/a', value: 2 }], [{ op: 'remove', path: '/nope' }], [{ op: 'replace', path: '/b/c', value: 1 }]]) {
      try {
        applyJsonPatch({ a: 1 }, patch);
        expect.unreachable();
      } catch (error) {
        expect((error as ApiError).code).toBe(422);
      }
    }
  });
});

describe('strategic merge patch', () => {
  const smp = (patch: unknown) => applyPatch(pod, 'strategic', patch);

  it('merges containers by name and their ports by containerPort', () => {
    const result = smp({
      spec: {
        containers: [{ name: 'app', image: 'app:2', ports: [{ containerPort: 443 }] }, { name: 'new', image: 'n:1' }],
      },
    });
    const spec = result.spec as { containers: Record<string, unknown>[] };
    expect(spec.containers.map((c) => [c.name, c.image])).toEqual([['app', 'app:2'], ['sidecar', 'side:1'], ['new', 'n:1']]);
    expect(spec.containers[0]?.ports).toEqual([{ containerPort: 80, protocol: 'TCP' }, { containerPort: 443 }]);
    expect(spec.containers[0]?.env).toEqual([{ name: 'A', value: '1' }]);
  });

  it('replaces lists without a merge key and merges maps, deleting on null', () => {
    const result = smp({ metadata: { labels: { tier: null, extra: 'x' } }, spec: { tolerations: [{ key: 'c' }] } });
    expect(result.metadata.labels).toEqual({ app: 'web', extra: 'x' });
    expect((result.spec as { tolerations: unknown }).tolerations).toEqual([{ key: 'c' }]);
  });

  it('honours $patch delete and replace, $setElementOrder, $retainKeys and $deleteFromPrimitiveList', () => {
    const result = smp({
      metadata: { '$deleteFromPrimitiveList/finalizers': ['a'], finalizers: ['b'] },
      spec: {
        '$setElementOrder/containers': [{ name: 'sidecar' }, { name: 'app' }],
        containers: [{ name: 'app', $patch: 'delete' }],
        volumes: [{ name: 'data', $retainKeys: ['name', 'hostPath'], hostPath: { path: '/x' } }],
      },
    });
    const spec = result.spec as Record<string, Record<string, unknown>[]>;
    expect(spec.containers?.map((c) => c.name)).toEqual(['sidecar']);
    expect(spec.volumes).toEqual([{ name: 'data', hostPath: { path: '/x' } }]);
    expect(result.metadata.finalizers).toEqual(['b']);

    const ordered = smp({ spec: { '$setElementOrder/containers': [{ name: 'sidecar' }, { name: 'app' }], containers: [{ name: 'app', image: 'app:3' }] } });
    expect((ordered.spec as { containers: { name: string }[] }).containers.map((c) => c.name)).toEqual(['sidecar', 'app']);

    const replaced = smp({ spec: { containers: [{ $patch: 'replace' }, { name: 'only', image: 'o:1' }] } });
    expect((replaced.spec as { containers: unknown[] }).containers).toEqual([{ name: 'only', image: 'o:1' }]);

    const mapReplaced = smp({ metadata: { labels: { $patch: 'replace', only: 'one' } } });
    expect(mapReplaced.metadata.labels).toEqual({ only: 'one' });
  });

  it('merges Service ports by port', () => {
    const service: KubeObject = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 's' },
      spec: { ports: [{ port: 80, targetPort: 8080 }, { port: 443 }] },
    };
    const result = applyPatch(service, 'strategic', { spec: { ports: [{ port: 80, targetPort: 9090 }] } });
    expect((result.spec as { ports: unknown }).ports).toEqual([{ port: 80, targetPort: 9090 }, { port: 443 }]);
  });

  it('rejects unknown directives', () => {
    expect(() => smp({ spec: { $bogus: 1 } })).toThrow(ApiError);
    expect(() => smp({ spec: { $patch: 'explode' } })).toThrow(ApiError);
  });
});
