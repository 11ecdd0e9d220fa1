// Objects and watch events the agent cannot read, fed over HTTP by the embedded API server with its validation off.
import type { V1Pod, V1Service } from '@kubernetes/client-node';
import { AgentMetrics } from '@kube-router/metrics';
import type { KubeObject } from '@kube-router/testkit';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createKubeContext } from './kube-context.js';
import type { KubeContext } from './kube-context.js';
import { UNREADABLE_OBJECT_EVENT_REASON } from './informer-factory.js';
import { captureLogs, pod, sleep, startTestCluster, waitFor } from './testing/fixtures.js';
import type { CapturedLogs, TestCluster } from './testing/fixtures.js';

let cluster: TestCluster;
let kube: KubeContext;
let metrics: AgentMetrics;
let logs: CapturedLogs;
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown): void => {
  unhandled.push(reason);
};

const service = (name: string, spec: Record<string, unknown>) => ({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default' }, spec });
const policy = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: 'networking.k8s.io/v1',
  kind: 'NetworkPolicy',
  metadata: { name, namespace: 'default' },
  spec,
});
const badPod = (name: string) => ({ ...pod(name), spec: { containers: 5 } });
const lax = { validate: false };

async function skippedCount(resource: string, reason: string): Promise<number> {
  const data = await metrics.registry.getSingleMetric('kube_router_informer_objects_skipped_total')?.get();
  return data?.values.find((value) => value.labels.resource === resource && value.labels.reason === reason)?.value ?? 0;
}

function warningsAbout(kind: string, name: string): KubeObject[] {
  return cluster.server
    .list('v1', 'Event', undefined)
    .filter((event) => {
      const involved = event.involvedObject as { kind?: string; name?: string } | undefined;
      return event.reason === UNREADABLE_OBJECT_EVENT_REASON && involved?.kind === kind && involved.name === name;
    });
}

function skipLogs(object: string): Record<string, unknown>[] {
  return logs.lines.filter((line) => line.object === object && String(line.msg).startsWith('skipping'));
}

beforeEach(async () => {
  unhandled.length = 0;
  process.on('unhandledRejection', onUnhandled);
  cluster = await startTestCluster({ validation: false, bookmarkIntervalMs: 100 });
  metrics = new AgentMetrics({ collectDefaultMetrics: false });
  logs = captureLogs();
  kube = createKubeContext({
    kubeConfig: cluster.kubeConfig,
    nodeName: 'node-1',
    logger: logs.logger,
    metrics,
    informers: { restartBackoff: { initialMs: 50, maxMs: 200 } },
    leaderElection: { namespace: 'kube-system', identity: 'test' },
  });
});

afterEach(async () => {
  await kube.informers.stop();
  await kube.events.flush();
  await cluster.close();
  process.off('unhandledRejection', onUnhandled);
});

describe('objects the agent cannot read', () => {
  it('are skipped on the list, and the informers sync with every other object', async () => {
    const { server } = cluster;
    server.create(pod('good-1'));
    server.create(badPod('bad-containers'), lax);
    server.create(pod('good-2'));
    server.create(service('bad-external-ips', { ports: [{ port: 80 }], externalIPs: 5 }), lax);
    server.create(service('good-svc', { ports: [{ port: 80 }] }));
    server.create(policy('bad-from', { podSelector: {}, ingress: [{ from: 5 }] }), lax);
    server.create(policy('good-policy', { podSelector: {}, ingress: [{}] }));
    const pods = kube.informers.pods();
    const services = kube.informers.services();
    const policies = kube.informers.networkPolicies();

    await kube.informers.start({ cacheSyncTimeoutMs: 5000 });

    expect(pods.list().map((p) => p.metadata?.name).sort()).toEqual(['good-1', 'good-2']);
    expect(services.list().map((s) => s.metadata?.name)).toEqual(['good-svc']);
    expect(policies.list().map((p) => p.metadata?.name)).toEqual(['good-policy']);
    expect(await skippedCount('pods', 'invalid_fields')).toBe(1);
    expect(await skippedCount('services', 'invalid_fields')).toBe(1);
    expect(await skippedCount('networkpolicies', 'invalid_fields')).toBe(1);
    expect(skipLogs('default/bad-containers')).toEqual([
      expect.objectContaining({ level: 40, informer: 'pods', reason: 'invalid_fields', problem: 'spec.containers: must be array' }),
    ]);
    expect(skipLogs('default/bad-from')[0]?.problem).toBe('spec.ingress[0].from: must be array');

    await waitFor('the Warning events', () => warningsAbout('Service', 'bad-external-ips').length === 1 && warningsAbout('Pod', 'bad-containers').length === 1);
    const [warning] = warningsAbout('Service', 'bad-external-ips');
    expect(warning).toMatchObject({
      type: 'Warning',
      message: 'kube-router cannot read this Service and ignores it until it is fixed: spec.externalIPs: must be array',
      involvedObject: { apiVersion: 'v1', kind: 'Service', namespace: 'default', name: 'bad-external-ips', uid: expect.any(String) },
    });
    expect(unhandled).toEqual([]);
  });

  it('are skipped on the watch, and later objects of the kind keep flowing', async () => {
    const { server } = cluster;
    const pods = kube.informers.pods();
    const services = kube.informers.services();
    const policies = kube.informers.networkPolicies();
    await kube.informers.start({ cacheSyncTimeoutMs: 5000 });

    server.create(badPod('bad-containers'), lax);
    server.create(service('bad-external-ips', { ports: [{ port: 80 }], externalIPs: 5 }), lax);
    server.create(policy('bad-from', { podSelector: {}, ingress: [{ from: 5 }] }), lax);
    server.create(pod('after'));
    server.create(service('after', { ports: [{ port: 80 }] }));
    server.create(policy('after', { podSelector: {} }));

    await waitFor('the objects created after the bad ones', () =>
      pods.get('default', 'after') !== undefined && services.get('default', 'after') !== undefined && policies.get('default', 'after') !== undefined,
    );
    expect(pods.get('default', 'bad-containers')).toBeUndefined();
    expect(services.get('default', 'bad-external-ips')).toBeUndefined();
    expect(policies.get('default', 'bad-from')).toBeUndefined();
    expect(await skippedCount('pods', 'invalid_fields')).toBe(1);
    expect(kube.informers.status().every((status) => status.watchHealthy && status.restarts === 0)).toBe(true);
    await waitFor('a Warning event for the pod', () => warningsAbout('Pod', 'bad-containers').length === 1);
    expect(unhandled).toEqual([]);
  });

  it('leave the cache when they turn unreadable, come back when fixed, and are reported once per version', async () => {
    const { server } = cluster;
    server.create(pod('flaky', { labels: { app: 'web' } }));
    const pods = kube.informers.pods();
    await kube.informers.start({ cacheSyncTimeoutMs: 5000 });
    expect(pods.get('default', 'flaky')).toBeDefined();

    const stored = server.get('v1', 'Pod', 'default', 'flaky')!;
    server.update({ ...stored, spec: { containers: [{ name: 'main', ports: 'http' }] } }, lax);
    // A stale copy would keep the last readable version; a relist would drop it: the cache holds neither.
    await waitFor('the unreadable pod gone from the cache', () => pods.get('default', 'flaky') === undefined);

    // A relist (the next watch is answered 410 Gone) sees the same version again: no second log, count or event.
    server.faults.failNextWatch('pods', 410);
    server.faults.closeWatches('pods');
    await waitFor('the relist', () => kube.informers.status()[0]!.lists === 2);
    await sleep(100);
    expect(skipLogs('default/flaky')).toHaveLength(1);
    expect(skipLogs('default/flaky')[0]?.problem).toBe('spec.containers[0].ports: must be array');
    expect(await skippedCount('pods', 'invalid_fields')).toBe(1);

    const broken = server.get('v1', 'Pod', 'default', 'flaky')!;
    server.update({ ...broken, spec: { containers: [{ name: 'main', image: 'pause' }] } });
    await waitFor('the fixed pod back in the cache', () => pods.get('default', 'flaky')?.spec?.containers[0]?.image === 'pause');
    expect(pods.get('default', 'flaky')?.metadata?.labels).toEqual({ app: 'web' });

    // Broken again: that is news, and reported again.
    const fixed = server.get('v1', 'Pod', 'default', 'flaky')!;
    server.update({ ...fixed, spec: { containers: 5 } }, lax);
    await waitFor('the second skip', () => skipLogs('default/flaky').length === 2);
    server.delete('v1', 'Pod', 'default', 'flaky');
    server.create(pod('later'));
    await waitFor('a later pod', () => pods.get('default', 'later') !== undefined);
    expect(skipLogs('default/flaky')).toHaveLength(2);
    expect(await skippedCount('pods', 'invalid_fields')).toBe(2);
    expect(unhandled).toEqual([]);
  });

  it('include events without metadata or object, bookmarks without one, and lines that are not events', async () => {
    const { server } = cluster;
    const pods = kube.informers.pods();
    await kube.informers.start({ cacheSyncTimeoutMs: 5000 });
    await waitFor('the watch', () => server.openWatches('pods') === 1);

    const hostile: unknown[] = [
      { type: 'ADDED', object: { apiVersion: 'v1', kind: 'Pod' } },
      { type: 'MODIFIED', object: { apiVersion: 'v1', kind: 'Pod', metadata: 5 } },
      { type: 'DELETED', object: null },
      { type: 'ADDED' },
      { type: 'BOOKMARK' },
      { type: 'BOOKMARK', object: { metadata: {} } },
      { type: 'ADDED', object: { metadata: { name: 'no-namespace' }, spec: { containers: [] } } },
      { type: 'ADDED', object: 'a string' },
      { type: 'SURPRISE', object: { metadata: { name: 'x', namespace: 'default' } } },
      { object: {} },
      [1, 2, 3],
      42,
    ];
    for (const event of hostile) expect(server.faults.sendWatchEvent('pods', event)).toBe(1);
    server.create(pod('after-the-noise'));

    await waitFor('the pod created after the noise', () => pods.get('default', 'after-the-noise') !== undefined);
    expect(pods.list().map((p) => p.metadata?.name)).toEqual(['after-the-noise']);
    expect(kube.informers.status()[0]).toMatchObject({ watchHealthy: true, restarts: 0, lists: 1 });
    expect(await skippedCount('pods', 'invalid_metadata')).toBe(3);
    expect(await skippedCount('pods', 'not_an_object')).toBe(3);
    expect(await skippedCount('pods', 'malformed_event')).toBe(6);
    expect(unhandled).toEqual([]);
  });

  it('hand plugins only objects of the declared shape', async () => {
    const { server } = cluster;
    server.create(pod('typed'));
    server.create({ ...pod('null-entry'), spec: { containers: [null] } }, lax);
    server.create(service('null-ingress', { ports: [{ port: 80 }] }), lax);
    server.patchStatus('v1', 'Service', 'default', 'null-ingress', { status: { loadBalancer: { ingress: [null] } } }, 'merge', lax);
    server.create(service('ip-number', { ports: [{ port: 80 }], loadBalancerIP: 7 }), lax);
    const pods = kube.informers.pods();
    const services = kube.informers.services();
    await kube.informers.start({ cacheSyncTimeoutMs: 5000 });

    const typed: V1Pod | undefined = pods.get('default', 'typed');
    expect(typed?.spec?.containers[0]?.name).toBe('main');
    expect(pods.get('default', 'null-entry')).toBeUndefined();
    const none: V1Service[] = services.list();
    expect(none).toEqual([]);
    expect(skipLogs('default/null-ingress')[0]?.problem).toBe('status.loadBalancer.ingress[0]: must be object');
    expect(skipLogs('default/ip-number')[0]?.problem).toBe('spec.loadBalancerIP: must be string');
  });
});
