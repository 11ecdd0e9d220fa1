// kube-apiserver's graceful deletion of Pods (the `gracefulPodDeletion` option), over HTTP and through kubectl: a
// DELETE of a pod bound to a node marks it, a kubelet's DELETE with grace 0 removes it.
import { execFile, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EndpointSliceObject } from './endpointslice-reconciler.js';
import type { ApiServer } from './server.js';
import { startApiServer } from './server.js';
import { podGracefulDeletion } from './store/graceful-deletion.js';
import { call, eventually, WatchClient } from './testing/http-client.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const NS = 'grace';
let server: ApiServer;
const api = <T = Json>(method: string, path: string, body?: unknown) => call<T>(server.url, method, path, body);
const podPath = (name: string) => `/api/v1/namespaces/${NS}/pods/${name}`;

function podManifest(name: string, spec: Json = {}, labels: Record<string, string> = {}): Json {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NS, labels },
    spec: { nodeName: 'node-1', containers: [{ name: 'app', image: 'app:1', ports: [{ containerPort: 80 }] }], ...spec },
  };
}

async function createPod(name: string, spec: Json = {}): Promise<Json> {
  const created = await api('POST', `/api/v1/namespaces/${NS}/pods`, podManifest(name, spec));
  expect(created.status).toBe(201);
  return created.body;
}

const secondsUntil = (timestamp: string) => (Date.parse(timestamp) - Date.now()) / 1000;

beforeAll(async () => {
  server = await startApiServer({ gracefulPodDeletion: true, endpointSliceController: true });
  server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
});
afterAll(() => server?.close());

describe('graceful pod deletion over HTTP', () => {
  it('marks a bound pod with deletionTimestamp and a 30 s grace, answers 200 with it and sends MODIFIED', async () => {
    const created = await createPod('default-grace');
    const watch = await WatchClient.open(`${server.url}/api/v1/namespaces/${NS}/pods?watch=true&resourceVersion=${created.metadata.resourceVersion}`);
    try {
      const deleted = await api('DELETE', podPath('default-grace'));
      expect(deleted.status).toBe(200);
      expect(deleted.body.metadata.deletionGracePeriodSeconds).toBe(30);
      expect(secondsUntil(deleted.body.metadata.deletionTimestamp)).toBeGreaterThan(28);
      expect(secondsUntil(deleted.body.metadata.deletionTimestamp)).toBeLessThanOrEqual(30);
      // The first mark bumps the generation, as kube-apiserver's BeforeDelete does.
      expect(deleted.body.metadata.generation).toBe(created.metadata.generation + 1);
      const event = await watch.next();
      expect(event.type).toBe('MODIFIED');
      expect(event.object.metadata).toMatchObject({ name: 'default-grace', deletionGracePeriodSeconds: 30 });
      expect((await api('GET', podPath('default-grace'))).body.metadata.deletionTimestamp).toBe(deleted.body.metadata.deletionTimestamp);
    } finally {
      watch.close();
    }
  });

  it('takes the grace from spec.terminationGracePeriodSeconds, else from DeleteOptions in the body', async () => {
    await createPod('spec-grace', { terminationGracePeriodSeconds: 5 });
    expect((await api('DELETE', podPath('spec-grace'))).body.metadata.deletionGracePeriodSeconds).toBe(5);
    await createPod('body-grace', { terminationGracePeriodSeconds: 5 });
    const deleted = await api('DELETE', podPath('body-grace'), { kind: 'DeleteOptions', apiVersion: 'v1', gracePeriodSeconds: 12 });
    expect(deleted.body.metadata.deletionGracePeriodSeconds).toBe(12);
    await createPod('negative-grace');
    expect((await api('DELETE', podPath('negative-grace'), { gracePeriodSeconds: -3 })).body.metadata.deletionGracePeriodSeconds).toBe(1);
  });

  it('lets a second DELETE shorten the grace, never lengthen it, and 0 remove the pod', async () => {
    // No grace at all leaves a pending deletion alone.
    expect((await api('DELETE', podPath('body-grace'))).body.metadata.deletionGracePeriodSeconds).toBe(12);
    await createPod('shorten');
    const marked = (await api('DELETE', podPath('shorten'), { gracePeriodSeconds: 20 })).body;

    const longer = await api('DELETE', podPath('shorten'), { gracePeriodSeconds: 60 });
    expect(longer.status).toBe(200);
    expect(longer.body.metadata).toMatchObject({
      resourceVersion: marked.metadata.resourceVersion,
      deletionTimestamp: marked.metadata.deletionTimestamp,
      deletionGracePeriodSeconds: 20,
    });

    const shorter = (await api('DELETE', podPath('shorten'), { gracePeriodSeconds: 5 })).body;
    expect(shorter.metadata.deletionGracePeriodSeconds).toBe(5);
    // Moved earlier by the 15 s taken off: the deletion still counts from when it began.
    expect(Date.parse(marked.metadata.deletionTimestamp) - Date.parse(shorter.metadata.deletionTimestamp)).toBe(15_000);
    expect(Number(shorter.metadata.resourceVersion)).toBeGreaterThan(Number(marked.metadata.resourceVersion));

    expect((await api('DELETE', podPath('shorten'), { gracePeriodSeconds: 0 })).status).toBe(200);
    expect((await api('GET', podPath('shorten'))).status).toBe(404);
  });

  it('removes at once a pod bound to no node, a finished pod, or one deleted with grace 0 (body or query)', async () => {
    await createPod('unbound', { nodeName: undefined });
    await createPod('finished');
    server.patchStatus('v1', 'Pod', NS, 'finished', { status: { phase: 'Succeeded' } });
    await createPod('forced-body');
    await createPod('forced-query');
    const watch = await WatchClient.open(`${server.url}/api/v1/namespaces/${NS}/pods?watch=true&resourceVersion=${server.resourceVersion}`);
    try {
      expect((await api('DELETE', podPath('unbound'))).status).toBe(200);
      expect((await api('DELETE', podPath('finished'))).status).toBe(200);
      expect((await api('DELETE', podPath('forced-body'), { gracePeriodSeconds: 0 })).status).toBe(200);
      expect((await api('DELETE', `${podPath('forced-query')}?gracePeriodSeconds=0`)).status).toBe(200);
      const events = [await watch.next(), await watch.next(), await watch.next(), await watch.next()];
      expect(events.map((event) => [event.type, event.object.metadata?.name])).toEqual([
        ['DELETED', 'unbound'],
        ['DELETED', 'finished'],
        ['DELETED', 'forced-body'],
        ['DELETED', 'forced-query'],
      ]);
    } finally {
      watch.close();
    }
  });

  it('reads DeleteOptions from the body when there is one, ignoring the query, as kube-apiserver does', async () => {
    await createPod('body-wins');
    const deleted = await api('DELETE', `${podPath('body-wins')}?gracePeriodSeconds=0`, { kind: 'DeleteOptions', apiVersion: 'v1' });
    expect(deleted.body.metadata.deletionGracePeriodSeconds).toBe(30);
  });

  it('computes a dry run without storing it, and refuses a grace period that is not an integer', async () => {
    const created = await createPod('dry');
    const dry = await api('DELETE', `${podPath('dry')}?dryRun=All`, { gracePeriodSeconds: 7 });
    expect(dry.body.metadata.deletionGracePeriodSeconds).toBe(7);
    const stored = (await api('GET', podPath('dry'))).body;
    expect(stored.metadata.deletionTimestamp).toBeUndefined();
    expect(stored.metadata.resourceVersion).toBe(created.metadata.resourceVersion);

    const badBody = await api('DELETE', podPath('dry'), { gracePeriodSeconds: 'soon' });
    expect(badBody.status).toBe(400);
    expect(badBody.body).toMatchObject({ kind: 'Status', reason: 'BadRequest' });
    expect((await api('DELETE', `${podPath('dry')}?gracePeriodSeconds=1.5`)).status).toBe(400);
    expect((await api('GET', podPath('dry'))).body.metadata.deletionTimestamp).toBeUndefined();
  });

  it('keeps the mark through status writes and leaves other kinds and namespace deletion immediate', async () => {
    await createPod('kept');
    const marked = (await api('DELETE', podPath('kept'))).body;
    const written = server.patchStatus('v1', 'Pod', NS, 'kept', { status: { phase: 'Running' } });
    expect(written.metadata.deletionTimestamp).toBe(marked.metadata.deletionTimestamp);
    // A client cannot clear it either: the server owns the field.
    const cleared = server.patch('v1', 'Pod', NS, 'kept', { metadata: { deletionTimestamp: null, labels: { x: 'y' } } });
    expect(cleared.metadata.deletionTimestamp).toBe(marked.metadata.deletionTimestamp);

    server.create({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'sa', namespace: NS } });
    expect((await api('DELETE', `/api/v1/namespaces/${NS}/serviceaccounts/sa`)).status).toBe(200);
    expect(server.get('v1', 'ServiceAccount', NS, 'sa')).toBeUndefined();

    server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'grace-gone' } });
    server.create({ ...podManifest('inside'), metadata: { name: 'inside', namespace: 'grace-gone' } });
    expect((await api('DELETE', '/api/v1/namespaces/grace-gone')).status).toBe(200);
    expect(server.list('v1', 'Pod', 'grace-gone')).toEqual([]);
  });

  it('deletes at once without the option, as before', async () => {
    const plain = await startApiServer({ seed: [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } }] });
    try {
      plain.create(podManifest('bound'));
      const deleted = await call<Json>(plain.url, 'DELETE', podPath('bound'));
      expect(deleted.status).toBe(200);
      expect(deleted.body.metadata.deletionTimestamp).toBeUndefined();
      expect(plain.get('v1', 'Pod', NS, 'bound')).toBeUndefined();
    } finally {
      await plain.close();
    }
  });

  it('shows a terminating Ready pod as a serving, terminating, not ready endpoint, and drops it once removed', async () => {
    server.create(podManifest('web-1', {}, { app: 'web' }));
    server.patchStatus('v1', 'Pod', NS, 'web-1', {
      status: { phase: 'Running', podIP: '10.244.0.10', podIPs: [{ ip: '10.244.0.10' }], conditions: [{ type: 'Ready', status: 'True' }] },
    });
    server.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-1' } });
    server.create({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: NS }, spec: { selector: { app: 'web' }, ports: [{ port: 80 }] } });
    const endpoints = () =>
      (server.list('discovery.k8s.io/v1', 'EndpointSlice', NS, { labelSelector: 'kubernetes.io/service-name=web' }) as EndpointSliceObject[]).flatMap(
        (slice) => slice.endpoints ?? [],
      );
    await eventually(() => endpoints().some((endpoint) => endpoint.conditions?.ready === true));

    await api('DELETE', podPath('web-1'), { gracePeriodSeconds: 30 });
    await eventually(() => endpoints()[0]?.conditions?.terminating === true);
    expect(endpoints()).toEqual([expect.objectContaining({ addresses: ['10.244.0.10'], conditions: { ready: false, serving: true, terminating: true } })]);

    server.delete('v1', 'Pod', NS, 'web-1', { gracePeriodSeconds: 0 });
    await eventually(() => endpoints().length === 0);
  });
});

describe('podGracefulDeletion', () => {
  const at = Date.parse('2026-01-01T00:00:00Z');
  const bound = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec: { nodeName: 'n' } };

  it('counts the grace from now, at second precision', () => {
    expect(podGracefulDeletion(bound, undefined, at + 999)).toEqual({
      action: 'mark',
      deletionTimestamp: '2026-01-01T00:00:30Z',
      deletionGracePeriodSeconds: 30,
      firstMark: true,
    });
  });

  it('deletes a pending deletion that has no grace left, and keeps one asked to wait longer', () => {
    const pending = (grace: number | undefined) => ({ ...bound, metadata: { name: 'p', deletionTimestamp: '2026-01-01T00:00:30Z', deletionGracePeriodSeconds: grace } });
    expect(podGracefulDeletion(pending(0), undefined, at).action).toBe('delete');
    expect(podGracefulDeletion(pending(undefined), 10, at).action).toBe('delete');
    expect(podGracefulDeletion(pending(30), 30, at).action).toBe('pending');
    expect(podGracefulDeletion(pending(30), 10, at)).toMatchObject({ action: 'mark', deletionTimestamp: '2026-01-01T00:00:10Z', firstMark: false });
  });
});

const hasKubectl = spawnSync('kubectl', ['version', '--client'], { timeout: 10_000 }).status === 0;

describe.skipIf(!hasKubectl)(`kubectl delete against graceful deletion${hasKubectl ? '' : ' (skipped: kubectl is not installed)'}`, () => {
  let workDir: string;
  let kubeconfig: string;

  beforeAll(async () => {
    workDir = await mkdtemp(join(tmpdir(), 'krt-graceful-kubectl-'));
    kubeconfig = await server.writeKubeconfig(join(workDir, 'kubeconfig'));
  });
  afterAll(() => (workDir ? rm(workDir, { recursive: true, force: true }) : undefined));

  const kubectl = (...args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string; endedAt: number }>((resolve) => {
      execFile('kubectl', ['--kubeconfig', kubeconfig, '--cache-dir', join(workDir, 'cache'), '-n', NS, ...args], { timeout: 30_000 }, (error, stdout, stderr) =>
        resolve({ code: error ? (((error as { code?: unknown }).code as number) ?? 1) : 0, stdout, stderr, endedAt: Date.now() }),
      );
    });

  it('waits until the kubelet removed the pod, then reports it deleted', async () => {
    await createPod('kubectl-wait');
    const deleting = kubectl('delete', 'pod', 'kubectl-wait');
    await eventually(() => server.get('v1', 'Pod', NS, 'kubectl-wait')?.metadata.deletionTimestamp !== undefined, 10_000);
    // Still waiting while the pod terminates.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const removedAt = Date.now();
    server.delete('v1', 'Pod', NS, 'kubectl-wait', { gracePeriodSeconds: 0 });
    const result = await deleting;
    expect(result.stderr).toBe('');
    expect(result).toMatchObject({ code: 0, stdout: 'pod "kubectl-wait" deleted\n' });
    expect(result.endedAt).toBeGreaterThanOrEqual(removedAt);
  });

  it('marks without waiting with --wait=false, and removes at once with --grace-period=0 --force', async () => {
    await createPod('kubectl-nowait');
    expect((await kubectl('delete', 'pod', 'kubectl-nowait', '--wait=false')).code).toBe(0);
    expect(server.get('v1', 'Pod', NS, 'kubectl-nowait')?.metadata.deletionGracePeriodSeconds).toBe(30);

    await createPod('kubectl-force');
    const forced = await kubectl('delete', 'pod', 'kubectl-force', '--grace-period=0', '--force');
    expect(forced.code).toBe(0);
    expect(server.get('v1', 'Pod', NS, 'kubectl-force')).toBeUndefined();

    await createPod('kubectl-grace');
    expect((await kubectl('delete', 'pod', 'kubectl-grace', '--grace-period=3', '--wait=false')).code).toBe(0);
    expect(server.get('v1', 'Pod', NS, 'kubectl-grace')?.metadata.deletionGracePeriodSeconds).toBe(3);
  });
});
