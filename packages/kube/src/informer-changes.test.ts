import type { V1Pod } from '@kubernetes/client-node';
import { AgentMetrics } from '@kube-router/metrics';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { InformerChanges } from './informer-changes.js';
import { InformerFactory } from './informer-factory.js';
import { captureLogs, pod, sleep, startTestCluster, waitFor, withLabels } from './testing/fixtures.js';
import type { TestCluster } from './testing/fixtures.js';

let cluster: TestCluster;
let factory: InformerFactory;

beforeEach(async () => {
  cluster = await startTestCluster();
  factory = new InformerFactory({
    kubeConfig: cluster.kubeConfig,
    logger: captureLogs().logger,
    metrics: new AgentMetrics({ collectDefaultMetrics: false }),
    restartBackoff: { initialMs: 100, maxMs: 400 },
  });
});

afterEach(async () => {
  await factory.stop();
  await cluster.close();
});

const key = (p: V1Pod) => `${p.metadata?.namespace}/${p.metadata?.name}`;

/** A consumer's copy of the cache, kept from the changes alone: what a compile from changes relies on. */
function replay(mirror: Map<string, V1Pod>, changes: InformerChanges<V1Pod>): void {
  for (const gone of changes.deleted) mirror.delete(key(gone));
  for (const object of changes.upserted) mirror.set(key(object), object);
}

const snapshot = (pods: readonly V1Pod[]) => new Map(pods.map((p) => [key(p), p]));

describe('change trackers', () => {
  it('hand on each changed object once with its latest state, so that a copy kept from them equals the cache', async () => {
    const { server } = cluster;
    for (let i = 0; i < 5; i++) server.create(pod(`p-${i}`));
    const tracker = factory.trackChanges('pods');
    const pods = factory.pods();
    await factory.start({ cacheSyncTimeoutMs: 5000 });
    // The first list arrives as adds; a consumer reads the full list at its first sync and drops these.
    expect(tracker.take()?.upserted).toHaveLength(5);
    const mirror = snapshot(pods.list());
    expect(tracker.take()).toEqual({ upserted: [], deleted: [] });

    server.create(pod('p-new'));
    server.update(withLabels(server.get('v1', 'Pod', 'default', 'p-1')!, { app: 'a' }));
    server.update(withLabels(server.get('v1', 'Pod', 'default', 'p-1')!, { app: 'b' }));
    server.delete('v1', 'Pod', 'default', 'p-2');
    // Added and deleted between two takes: the consumer never saw it, and hears of it as gone (a no-op for it).
    server.create(pod('p-brief'));
    server.delete('v1', 'Pod', 'default', 'p-brief');
    await waitFor('every event in the cache', () => pods.get('default', 'p-brief') === undefined && pods.list().length === 5);
    await waitFor('the last event', () => pods.get('default', 'p-1')?.metadata?.labels?.app === 'b');
    await sleep(50);

    const changes = tracker.take()!;
    expect(changes.upserted.map(key).sort()).toEqual(['default/p-1', 'default/p-new']);
    expect(changes.deleted.map(key).sort()).toEqual(['default/p-2', 'default/p-brief']);
    // The cache's own objects, so that a consumer that also reads the lists sees the same instances.
    expect(changes.upserted.find((p) => p.metadata?.name === 'p-1')).toBe(pods.get('default', 'p-1'));
    replay(mirror, changes);
    expect(mirror).toEqual(snapshot(pods.list()));
    expect(tracker.take()).toEqual({ upserted: [], deleted: [] });
  });

  it('stay complete through a relist after 410 Gone', async () => {
    const { server } = cluster;
    for (let i = 0; i < 10; i++) server.create(pod(`before-${i}`));
    const tracker = factory.trackChanges('pods');
    const pods = factory.pods();
    await factory.start({ cacheSyncTimeoutMs: 5000 });
    tracker.take();
    const mirror = snapshot(pods.list());
    await waitFor('the watch', () => server.openWatches('pods') === 1);

    server.faults.closeWatches();
    for (let i = 0; i < 3; i++) server.delete('v1', 'Pod', 'default', `before-${i}`);
    server.create(pod('during'));
    server.update(withLabels(server.get('v1', 'Pod', 'default', 'before-9')!, { changed: 'yes' }));
    server.faults.expireResourceVersions();
    await waitFor('the relist', () => server.requests.count({ verb: 'list', resource: 'pods' }) === 2);
    await waitFor('the cache to match the server', () => pods.list().length === 8);

    const changes = tracker.take()!;
    // ListWatch's relist updates every listed object and deletes those gone.
    expect(changes.deleted.map(key).sort()).toEqual(['default/before-0', 'default/before-1', 'default/before-2']);
    replay(mirror, changes);
    expect(mirror).toEqual(snapshot(pods.list()));
    expect(mirror.get('default/before-9')?.metadata?.labels?.changed).toBe('yes');
  });

  it('give up beyond their limit once, so that the consumer reads the full list, and collect again after', async () => {
    const { server } = cluster;
    const tracker = factory.trackChanges('pods', { limit: 3 });
    const pods = factory.pods();
    await factory.start({ cacheSyncTimeoutMs: 5000 });
    tracker.take();
    for (let i = 0; i < 4; i++) server.create(pod(`burst-${i}`));
    await waitFor('the burst', () => pods.list().length === 4);
    expect(tracker.take()).toBeUndefined();
    server.create(pod('later'));
    await waitFor('later', () => pods.get('default', 'later') !== undefined);
    expect(tracker.take()?.upserted.map(key)).toEqual(['default/later']);

    tracker.close();
    server.create(pod('after-close'));
    await waitFor('after-close', () => pods.get('default', 'after-close') !== undefined);
    expect(tracker.take()).toEqual({ upserted: [], deleted: [] });
  });
});
