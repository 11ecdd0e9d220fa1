import type { V1Pod } from '@kubernetes/client-node';
import { AgentMetrics } from '@kube-router/metrics';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CacheSyncTimeoutError, InformerFactory } from './informer-factory.js';
import { RESOURCE_NAMES } from './resources.js';
import { captureLogs, pod, sleep, startTestCluster, waitFor, withLabels } from './testing/fixtures.js';
import type { TestCluster } from './testing/fixtures.js';

let cluster: TestCluster;
let factory: InformerFactory;
let metrics: AgentMetrics;

function makeFactory(options: Partial<ConstructorParameters<typeof InformerFactory>[0]> = {}): InformerFactory {
  factory = new InformerFactory({
    kubeConfig: cluster.kubeConfig,
    logger: captureLogs().logger,
    metrics,
    restartBackoff: { initialMs: 100, maxMs: 400 },
    ...options,
  });
  return factory;
}

async function metricValue(name: string, resource: string): Promise<number | undefined> {
  const metric = metrics.registry.getSingleMetric(name);
  const data = await metric?.get();
  return data?.values.find((value) => value.labels.resource === resource)?.value;
}

const names = (pods: readonly V1Pod[]): string[] => pods.map((p) => p.metadata?.name ?? '').sort();

beforeEach(async () => {
  cluster = await startTestCluster();
  metrics = new AgentMetrics({ collectDefaultMetrics: false });
});

afterEach(async () => {
  await factory?.stop();
  await cluster.close();
});

describe('informers', () => {
  it('see adds, updates and deletes, and answer through their indexes', async () => {
    const { server } = cluster;
    server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'team-a' } });
    server.create(pod('web-1', { namespace: 'team-a', nodeName: 'node-1' }));
    server.create(pod('web-2', { namespace: 'team-a', nodeName: 'node-2' }));
    makeFactory();
    const pods = factory.pods();
    const slices = factory.endpointSlices();
    const namespaces = factory.namespaces();
    let changes = 0;
    factory.onChange('pods', () => changes++);
    await factory.start({ cacheSyncTimeoutMs: 5000 });

    expect(pods.hasSynced()).toBe(true);
    expect(names(pods.listInNamespace('team-a'))).toEqual(['web-1', 'web-2']);
    expect(names(pods.listOnNode('node-1'))).toEqual(['web-1']);
    expect(pods.get('team-a', 'web-2')?.spec?.nodeName).toBe('node-2');
    // Listed objects carry their kind, like watched ones, so they can be an Event's involved object.
    expect(pods.get('team-a', 'web-2')?.kind).toBe('Pod');
    expect(namespaces.get('team-a')?.metadata?.name).toBe('team-a');
    await waitFor('the change handler after the initial list', () => changes >= 1);

    // Add
    const changesBefore = changes;
    server.create(pod('web-3', { namespace: 'team-a', nodeName: 'node-1' }));
    await waitFor('web-3 in the lister', () => pods.get('team-a', 'web-3') !== undefined);
    expect(names(pods.listOnNode('node-1'))).toEqual(['web-1', 'web-3']);
    await waitFor('a change notification', () => changes > changesBefore);

    // Update: moving a pod to another node moves it between index buckets.
    server.update(withLabels(server.get('v1', 'Pod', 'team-a', 'web-3')!, { app: 'web' }));
    await waitFor('the label update', () => pods.get('team-a', 'web-3')?.metadata?.labels?.app === 'web');
    server.delete('v1', 'Pod', 'team-a', 'web-1');
    await waitFor('web-1 gone', () => pods.get('team-a', 'web-1') === undefined);
    expect(names(pods.listOnNode('node-1'))).toEqual(['web-3']);
    expect(names(pods.list())).toEqual(['web-2', 'web-3']);

    // Endpoint slices by service, through the kubernetes.io/service-name label.
    const slice = (name: string, service: string) => ({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name, namespace: 'team-a', labels: { 'kubernetes.io/service-name': service } },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['10.0.0.1'] }],
    });
    server.create(slice('web-abc', 'web'));
    server.create(slice('web-def', 'web'));
    server.create(slice('db-abc', 'db'));
    await waitFor('three slices', () => slices.list().length === 3);
    expect(slices.listForService('team-a', 'web').map((s) => s.metadata?.name).sort()).toEqual(['web-abc', 'web-def']);
    expect(slices.listForService('default', 'web')).toEqual([]);
    server.delete('discovery.k8s.io/v1', 'EndpointSlice', 'team-a', 'web-abc');
    await waitFor('web-abc gone from the index', () => slices.listForService('team-a', 'web').length === 1);
    expect(await metricValue('kube_router_informer_objects', 'endpointslices')).toBe(2);
  });

  it('make one list and one watch per resource type however many consumers use it', async () => {
    makeFactory();
    for (let consumer = 0; consumer < 3; consumer++) {
      for (const resource of RESOURCE_NAMES) {
        factory.lister(resource);
        factory.onChange(resource, () => {});
      }
      factory.pods();
      factory.endpointSlices();
    }
    // A scoped informer is a separate informer with its own key.
    const localPods = factory.pods({ fieldSelector: 'spec.nodeName=node-1' });
    factory.onChange('pods', () => {}, { fieldSelector: 'spec.nodeName=node-1' });
    cluster.server.create(pod('here', { nodeName: 'node-1' }));
    cluster.server.create(pod('there', { nodeName: 'node-2' }));
    await factory.start({ cacheSyncTimeoutMs: 5000 });
    // Synced means listed; each watch follows its list at once.
    await waitFor('every watch', () => cluster.server.openWatches() === RESOURCE_NAMES.length + 1);

    const { requests } = cluster.server;
    for (const resource of RESOURCE_NAMES.filter((name) => name !== 'pods')) {
      expect(requests.count({ verb: 'list', resource }), `lists of ${resource}`).toBe(1);
      expect(requests.count({ verb: 'watch', resource }), `watches of ${resource}`).toBe(1);
    }
    expect(requests.count({ verb: 'list', resource: 'pods' })).toBe(2);
    expect(requests.count({ verb: 'watch', resource: 'pods' })).toBe(2);
    expect(cluster.server.openWatches()).toBe(RESOURCE_NAMES.length + 1);
    expect(factory.status().map((status) => status.key).sort()).toEqual(
      [...RESOURCE_NAMES, 'pods{fieldSelector=spec.nodeName=node-1}'].sort(),
    );
    expect(names(localPods.list())).toEqual(['here']);
    expect(names(factory.pods().list())).toEqual(['here', 'there']);
  });

  it('relist after 410 Gone and resume without losing an event made while the watch was broken', async () => {
    const { server } = cluster;
    for (let i = 0; i < 10; i++) server.create(pod(`before-${i}`));
    makeFactory();
    const pods = factory.pods();
    await factory.start({ cacheSyncTimeoutMs: 5000 });
    expect(pods.list()).toHaveLength(10);

    await waitFor('the watch', () => server.openWatches('pods') === 1);

    // The watch breaks, changes happen, then the history is compacted past the client's resourceVersion: resuming
    // gets 410 Gone and the client must relist to see them.
    server.faults.closeWatches();
    for (let i = 0; i < 10; i++) server.create(pod(`during-${i}`));
    for (let i = 0; i < 3; i++) server.delete('v1', 'Pod', 'default', `before-${i}`);
    server.update(withLabels(server.get('v1', 'Pod', 'default', 'before-9')!, { changed: 'yes' }));
    server.faults.expireResourceVersions();
    // More changes while the client resumes, gets 410 and relists: some land before the relist, some after it.
    for (let i = 10; i < 20; i++) {
      server.create(pod(`during-${i}`));
      await sleep(2);
    }
    await waitFor('the relist', () => server.requests.count({ verb: 'list', resource: 'pods' }) === 2);
    server.create(pod('after-relist'));

    const expected = server.list('v1', 'Pod').map((p) => p.metadata.name ?? '').sort();
    expect(expected).toHaveLength(10 - 3 + 20 + 1);
    await waitFor('the lister to match the server', () => names(pods.list()).join() === expected.join());
    expect(pods.get('default', 'before-9')?.metadata?.labels?.changed).toBe('yes');
    // client-node relisted by itself: no watchdog restart was needed.
    expect(factory.status()[0]).toMatchObject({ restarts: 0, watchHealthy: true });
    expect(await metricValue('kube_router_informer_watch_healthy', 'pods')).toBe(1);
    // Counted, so that an operator sees every informer relist at once after an outage or a compaction.
    expect(await metricValue('kube_router_informer_watch_expired_total', 'pods')).toBe(1);
  });

  it('resume from the last resourceVersion when a watch ends normally, without relisting', async () => {
    const { server } = cluster;
    makeFactory();
    const pods = factory.pods();
    await factory.start({ cacheSyncTimeoutMs: 5000 });
    await waitFor('the watch', () => server.openWatches('pods') === 1);
    server.faults.closeWatches('pods');
    server.create(pod('while-reconnecting'));
    await waitFor('the pod created while reconnecting', () => pods.get('default', 'while-reconnecting') !== undefined);
    expect(server.requests.count({ verb: 'list', resource: 'pods' })).toBe(1);
    expect(server.requests.count({ verb: 'watch', resource: 'pods' })).toBe(2);
  });

  it('relist when the API server answers a watch with 410 Gone itself', async () => {
    const { server } = cluster;
    makeFactory();
    const pods = factory.pods();
    await factory.start({ cacheSyncTimeoutMs: 5000 });
    await waitFor('the watch', () => server.openWatches('pods') === 1);
    server.faults.failNextWatch('pods', 410);
    server.faults.closeWatches('pods');
    server.create(pod('after-gone'));
    await waitFor('the relist', () => server.requests.count({ verb: 'list', resource: 'pods' }) === 2);
    await waitFor('the new pod', () => pods.get('default', 'after-gone') !== undefined);
    expect(factory.status()[0]).toMatchObject({ restarts: 0 });
    expect(await metricValue('kube_router_informer_watch_expired_total', 'pods')).toBe(1);
  });

  it('renew each watch after its server-side timeout, from the last resourceVersion', async () => {
    const { server } = cluster;
    makeFactory({ watchTimeoutSeconds: 1 });
    const pods = factory.pods();
    await factory.start({ cacheSyncTimeoutMs: 5000 });
    await waitFor('a renewed watch', () => server.requests.count({ verb: 'watch', resource: 'pods' }) >= 2, 5000);
    server.create(pod('later'));
    await waitFor('the pod', () => pods.get('default', 'later') !== undefined);
    expect(server.requests.count({ verb: 'list', resource: 'pods' })).toBe(1);
    expect(factory.status()[0]).toMatchObject({ restarts: 0, watchHealthy: true });
  });

  it('time out a watch the API server does not answer, and restart it', async () => {
    const { server } = cluster;
    makeFactory({ requestTimeoutMs: 300 });
    const pods = factory.pods();
    await factory.start({ cacheSyncTimeoutMs: 5000 });
    await waitFor('the watch', () => factory.status()[0]?.watchHealthy === true);
    server.faults.setLatency(60_000);
    server.faults.closeWatches('pods');
    await waitFor('the watch to be reported down', () => factory.status()[0]?.watchHealthy === false, 2000);
    expect(factory.status()[0]?.lastError).toBe('watch /api/v1/pods: no response within 300 ms');
    server.faults.setLatency(0);
    server.create(pod('after-blackhole'));
    await waitFor('the pod', () => pods.get('default', 'after-blackhole') !== undefined, 5000);
    expect(factory.status()[0]).toMatchObject({ watchHealthy: true });
    expect(factory.status()[0]?.restarts).toBeGreaterThanOrEqual(1);
  });

  it('survive a failed watch through the watchdog: restart with backoff, health back to 1, later changes seen', async () => {
    const { server } = cluster;
    const { logger, lines } = captureLogs();
    makeFactory({ logger, watchDownGraceMs: 0 });
    const pods = factory.pods();
    expect(await metricValue('kube_router_informer_watch_healthy', 'pods')).toBe(0);
    await factory.start({ cacheSyncTimeoutMs: 5000 });
    await waitFor('the watch', () => factory.status()[0]?.watchHealthy === true);
    expect(await metricValue('kube_router_informer_watch_healthy', 'pods')).toBe(1);
    expect(await metricValue('kube_router_informer_restarts_total', 'pods')).toBe(0);

    // Three failures in a row: restarts after about 100, 200 and 400 ms.
    server.faults.failNextWatch('pods', 500, 3);
    server.faults.closeWatches('pods');
    server.create(pod('during-outage'));
    await waitFor('the watch to be reported down', () => factory.status()[0]?.watchHealthy === false);
    expect(await metricValue('kube_router_informer_watch_healthy', 'pods')).toBe(0);
    expect(factory.readinessCheck()).toMatch(/pods: watch down for .*HTTP 500/);

    await waitFor('the watch to be restored', () => factory.status()[0]?.watchHealthy === true, 10_000);
    expect(await metricValue('kube_router_informer_watch_healthy', 'pods')).toBe(1);
    expect(await metricValue('kube_router_informer_restarts_total', 'pods')).toBe(3);
    expect(factory.readinessCheck()).toBeUndefined();
    const warnings = lines.filter((line) => line.msg === 'informer list/watch failed; restarting it');
    expect(warnings.map((line) => line.retryInMs)).toEqual([
      expect.any(Number),
      expect.any(Number),
      expect.any(Number),
    ]);
    const delays = warnings.map((line) => line.retryInMs as number);
    expect(delays[0]).toBeGreaterThanOrEqual(100);
    expect(delays[1]).toBeGreaterThanOrEqual(200);
    expect(delays[2]).toBeLessThanOrEqual(400);

    await waitFor('the pod created during the outage', () => pods.get('default', 'during-outage') !== undefined);
    server.create(pod('after-outage'));
    await waitFor('a pod created after the restart', () => pods.get('default', 'after-outage') !== undefined);
  });

  it('reject start with a clear error naming the informers that did not sync in time', async () => {
    const { server } = cluster;
    makeFactory({ requestTimeoutMs: 400 });
    factory.pods();
    factory.nodes();
    server.faults.setLatency(5000);
    const error = await factory.start({ cacheSyncTimeoutMs: 700 }).then(
      () => undefined,
      (rejection: unknown) => rejection,
    );
    expect(error).toBeInstanceOf(CacheSyncTimeoutError);
    expect((error as Error).message).toBe(
      'informer caches did not sync within 700ms (--cache-sync-timeout): ' +
        'pods (last error: list pods: no response from the API server within 400 ms); ' +
        'nodes (last error: list nodes: no response from the API server within 400 ms)',
    );
    expect((error as CacheSyncTimeoutError).unsynced.map((status) => status.key)).toEqual(['pods', 'nodes']);
    expect(factory.readinessCheck()).toMatch(/^informers: pods: not synced \(list pods: no response/);

    // The informers keep trying and sync once the API server answers again.
    server.faults.reset();
    await factory.waitForCacheSync(10_000);
    expect(factory.readinessCheck()).toBeUndefined();
  });

  it('name the API server\'s refusal in the sync timeout error', async () => {
    const { server } = cluster;
    makeFactory();
    factory.pods();
    factory.services();
    server.faults.failNextRequest('list', 'services', 403, 1000);
    const error = await factory.start({ cacheSyncTimeoutMs: 500 }).then(
      () => undefined,
      (rejection: unknown) => rejection,
    );
    expect(error).toBeInstanceOf(CacheSyncTimeoutError);
    expect((error as Error).message).toMatch(
      /^informer caches did not sync within 500ms \(--cache-sync-timeout\): services \(last error: HTTP 403 Forbidden: injected fault: list services fails with 403\)$/,
    );
    expect(factory.status().find((status) => status.key === 'services')?.restarts).toBeGreaterThanOrEqual(1);
  });

  it('report readiness: not started, then not synced, then ready', async () => {
    makeFactory();
    factory.pods();
    expect(factory.readinessCheck()).toBe('informers: pods: not started');
    const started = factory.start({ cacheSyncTimeoutMs: 5000 });
    expect(factory.readinessCheck()).toBe('informers: pods: not synced');
    await started;
    expect(factory.readinessCheck()).toBeUndefined();
    // An informer created after start starts at once and must sync too.
    factory.services();
    expect(factory.readinessCheck()).toBe('informers: services: not synced');
    await factory.waitForCacheSync(5000);
    expect(factory.hasSynced()).toBe(true);
  });

  it('page large lists and stop cleanly', async () => {
    const { server } = cluster;
    for (let i = 0; i < 25; i++) server.create(pod(`p-${String(i).padStart(2, '0')}`));
    makeFactory({ pageSize: 10 });
    const pods = factory.pods();
    await factory.start({ cacheSyncTimeoutMs: 5000 });
    expect(pods.list()).toHaveLength(25);
    expect(server.requests.count({ verb: 'list', resource: 'pods' })).toBe(3);
    await factory.stop();
    await waitFor('the watch to close', () => server.openWatches('pods') === 0);
    server.create(pod('after-stop'));
    await sleep(100);
    // The lister keeps the last state and hears nothing more.
    expect(pods.list()).toHaveLength(25);
    expect(factory.readinessCheck()).toBe('informers: pods: not started');
  });
});
