import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EventRecorder } from './event-recorder.js';
import { captureLogs, pod, startTestCluster } from './testing/fixtures.js';
import type { CapturedLogs, TestCluster } from './testing/fixtures.js';

interface StoredEvent {
  metadata: { name: string; namespace: string };
  involvedObject: { kind: string; name: string; namespace?: string; uid?: string; apiVersion?: string };
  type: string;
  reason: string;
  message: string;
  count: number;
  firstTimestamp: string;
  lastTimestamp: string;
  source: { component: string; host: string };
}

let cluster: TestCluster;
let logs: CapturedLogs;
let clock: number;
let recorder: EventRecorder;

function events(namespace = 'default'): StoredEvent[] {
  return cluster.server.list('v1', 'Event', namespace) as unknown as StoredEvent[];
}

beforeEach(async () => {
  cluster = await startTestCluster();
  logs = captureLogs();
  clock = Date.parse('2026-01-01T00:00:00Z');
  recorder = new EventRecorder({ kubeConfig: cluster.kubeConfig, nodeName: 'node-1', logger: logs.logger, now: () => clock });
});

afterEach(async () => {
  await cluster.close();
});

describe('event recorder', () => {
  it('creates an Event about the object, from kube-router on this node', async () => {
    const created = cluster.server.create(pod('web'));
    await recorder.warning(created as never, 'SyncFailed', 'iptables-restore failed: exit 1');
    const [event, ...rest] = events();
    expect(rest).toEqual([]);
    expect(event).toMatchObject({
      type: 'Warning',
      reason: 'SyncFailed',
      message: 'iptables-restore failed: exit 1',
      count: 1,
      source: { component: 'kube-router', host: 'node-1' },
      involvedObject: { apiVersion: 'v1', kind: 'Pod', name: 'web', namespace: 'default', uid: created.metadata.uid },
    });
    expect(event?.metadata.name).toMatch(/^web\.[0-9a-f]+$/);
    expect(Date.parse(event!.firstTimestamp)).toBe(clock);
  });

  it('aggregates repeats into one Event with a count and the last time', async () => {
    const created = cluster.server.create(pod('web'));
    await recorder.warning(created as never, 'SyncFailed', 'boom');
    clock += 60_000;
    await recorder.warning(created as never, 'SyncFailed', 'boom');
    clock += 60_000;
    // Repeats that arrive while a write is under way are folded into the next write.
    const patchesBefore = cluster.server.requests.count({ verb: 'patch', resource: 'events' });
    await Promise.all([1, 2, 3, 4, 5].map(() => recorder.warning(created as never, 'SyncFailed', 'boom')));
    expect(cluster.server.requests.count({ verb: 'patch', resource: 'events' }) - patchesBefore).toBe(2);
    expect(cluster.server.requests.count({ verb: 'create', resource: 'events' })).toBe(1);
    expect(events()).toHaveLength(1);
    const [event] = events();
    expect(event?.count).toBe(7);
    expect(Date.parse(event!.firstTimestamp)).toBe(Date.parse('2026-01-01T00:00:00Z'));
    expect(Date.parse(event!.lastTimestamp)).toBe(clock);

    // Another message, reason or type is another Event.
    await recorder.warning(created as never, 'SyncFailed', 'another failure');
    await recorder.normal(created as never, 'SyncFailed', 'boom');
    expect(events()).toHaveLength(3);
  });

  it('files events about cluster-scoped objects in the default namespace and accepts object references', async () => {
    const node = cluster.server.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-1' } });
    await recorder.normal(node as never, 'RoutesSynced', 'routes programmed');
    await recorder.warning({ kind: 'Service', namespace: 'kube-system', name: 'dns', apiVersion: 'v1' }, 'NoIP', 'pool empty');
    expect(events('default').map((e) => `${e.involvedObject.kind}/${e.involvedObject.name}`)).toEqual(['Node/node-1']);
    expect(events('kube-system').map((e) => `${e.involvedObject.kind}/${e.involvedObject.name}`)).toEqual(['Service/dns']);
  });

  it('starts a new Event when the aggregated one is gone (expired)', async () => {
    const created = cluster.server.create(pod('web'));
    await recorder.warning(created as never, 'SyncFailed', 'boom');
    const [first] = events();
    cluster.server.delete('v1', 'Event', 'default', first!.metadata.name);
    clock += 1000;
    await recorder.warning(created as never, 'SyncFailed', 'boom');
    const [second, ...rest] = events();
    expect(rest).toEqual([]);
    expect(second?.metadata.name).not.toBe(first?.metadata.name);
    expect(second?.count).toBe(2);
  });

  it('never throws into the caller: failures are logged', async () => {
    const created = cluster.server.create(pod('web'));
    cluster.server.faults.failNextRequest('create', 'events', 500);
    await expect(recorder.warning(created as never, 'SyncFailed', 'boom')).resolves.toBeUndefined();
    await expect(recorder.warning({ metadata: { name: 'no-kind' } }, 'SyncFailed', 'boom')).resolves.toBeUndefined();
    const failures = logs.lines.filter((line) => line.msg === 'could not record an event');
    expect(failures).toHaveLength(2);
    expect(failures[0]?.err).toMatch(/HTTP 500/);
    expect(failures[1]?.err).toMatch(/needs a kind and a name/);

    // An unreachable API server.
    await cluster.close();
    await expect(recorder.warning(created as never, 'Other', 'boom')).resolves.toBeUndefined();
    cluster = await startTestCluster();
  });

  it('truncates long messages to the API server limit', async () => {
    const created = cluster.server.create(pod('web'));
    await recorder.warning(created as never, 'SyncFailed', 'x'.repeat(5000));
    const [event] = events();
    expect(Buffer.byteLength(event!.message)).toBeLessThanOrEqual(1024);
    expect(event!.message.endsWith('...')).toBe(true);
  });
});
