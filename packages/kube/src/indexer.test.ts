import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { Indexer } from './indexer.js';

const pod = (name: string, nodeName?: string, namespace = 'default'): V1Pod => ({
  metadata: { name, namespace },
  spec: { containers: [], ...(nodeName && { nodeName }) },
});

describe('Indexer', () => {
  it('files objects under their keys and moves them when they change', () => {
    const indexer = new Indexer<V1Pod>({ node: (p) => (p.spec?.nodeName ? [p.spec.nodeName] : []) });
    indexer.upsert(pod('a', 'n1'));
    indexer.upsert(pod('b', 'n1'));
    indexer.upsert(pod('a', 'n1', 'other'));
    indexer.upsert(pod('pending'));
    expect(indexer.byIndex('node', 'n1').map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`)).toEqual([
      'default/a',
      'default/b',
      'other/a',
    ]);
    indexer.upsert(pod('b', 'n2'));
    expect(indexer.byIndex('node', 'n2').map((p) => p.metadata?.name)).toEqual(['b']);
    expect(indexer.byIndex('node', 'n1')).toHaveLength(2);
    indexer.remove(pod('a', 'n1'));
    indexer.remove(pod('never-added', 'n1'));
    expect(indexer.byIndex('node', 'n1').map((p) => p.metadata?.namespace)).toEqual(['other']);
    expect(indexer.size).toBe(3);
    expect(() => indexer.byIndex('zone', 'x')).toThrow(/no index zone/);
  });
});
