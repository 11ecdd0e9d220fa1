import { describe, expect, it } from 'vitest';
import { ClusterIndex } from './cluster-index.js';
import { NODE, namespace, pod } from './testing/fixtures.js';

const ids = (pods: Iterable<{ id: string }>) => [...pods].map((p) => p.id).sort();

describe('ClusterIndex', () => {
  it('indexes actionable pods by namespace and locality, and reports them as changes', () => {
    const index = new ClusterIndex(NODE);
    const changes = index.update(
      [
        pod('a/local', { ips: ['10.0.0.1'] }),
        pod('a/remote', { ips: ['10.0.0.2'], node: 'node-b' }),
        pod('b/hostnet', { ips: ['10.0.0.3'], hostNetwork: true }),
      ],
      [],
    );
    expect(changes.pods.map((change) => [change.before?.id, change.after?.id])).toEqual([
      [undefined, 'a/local'],
      [undefined, 'a/remote'],
    ]);
    expect(ids(index.podsIn('a'))).toEqual(['a/local', 'a/remote']);
    expect(ids(index.localPodsIn('a'))).toEqual(['a/local']);
    expect(ids(index.allPods())).toEqual(['a/local', 'a/remote']);
  });

  it('reports nothing for the same objects, or for equal copies', () => {
    const pods = [pod('a/p', { ips: ['10.0.0.1'] })];
    const index = new ClusterIndex(NODE);
    index.update(pods, [namespace('a')]);
    expect(index.update(pods, [namespace('a')])).toEqual({ pods: [], namespaces: [] });
    expect(index.update([structuredClone(pods[0]!)], [namespace('a')])).toEqual({ pods: [], namespaces: [] });
  });

  it('reports removals, including pods that stop being actionable', () => {
    const index = new ClusterIndex(NODE);
    index.update([pod('a/p', { ips: ['10.0.0.1'] }), pod('a/q', { ips: ['10.0.0.2'] })], []);
    const changes = index.update([pod('a/q', { ips: ['10.0.0.2'], phase: 'Succeeded' })], []);
    expect(changes.pods.map((change) => [change.before?.id, change.after?.id])).toEqual([
      ['a/q', undefined],
      ['a/p', undefined],
    ]);
    expect(ids(index.allPods())).toEqual([]);
  });

  it('takes the last of two pods with the same name', () => {
    const index = new ClusterIndex(NODE);
    index.update([pod('a/p', { ips: ['10.0.0.1'] }), pod('a/p', { ips: ['10.0.0.9'] })], []);
    expect([...index.allPods()].map((p) => p.ips.ipv4)).toEqual([['10.0.0.9']]);
    index.update([pod('a/p', { ips: ['10.0.0.9'] })], []);
    expect([...index.allPods()].map((p) => p.ips.ipv4)).toEqual([['10.0.0.9']]);
  });

  it('gives namespaces without an object the label the API server would set', () => {
    const index = new ClusterIndex(NODE);
    index.update([pod('orphan/p', { ips: ['10.0.0.1'] })], [namespace('a', { env: 'x' })]);
    expect(Object.fromEntries(index.namespaces())).toEqual({
      a: { 'kubernetes.io/metadata.name': 'a', env: 'x' },
      orphan: { 'kubernetes.io/metadata.name': 'orphan' },
    });
  });

  it('reports namespace label changes with the labels before and after', () => {
    const index = new ClusterIndex(NODE);
    index.update([], [namespace('a', { env: 'x' })]);
    expect(index.update([], [namespace('a', { env: 'y' })]).namespaces).toEqual([
      {
        name: 'a',
        before: { 'kubernetes.io/metadata.name': 'a', env: 'x' },
        after: { 'kubernetes.io/metadata.name': 'a', env: 'y' },
      },
    ]);
    expect(index.update([], []).namespaces).toEqual([
      {
        name: 'a',
        before: { 'kubernetes.io/metadata.name': 'a', env: 'y' },
        after: { 'kubernetes.io/metadata.name': 'a' },
      },
    ]);
  });
});
