// @kubernetes/client-node, a client written by others, against the embedded server over HTTP.
import { CoreV1Api, KubeConfig, KubernetesObjectApi, makeInformer, PatchStrategy, setHeaderOptions, Watch } from '@kubernetes/client-node';
import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiServer } from './server.js';
import { startApiServer } from './server.js';
import { eventually } from './testing/http-client.js';

let server: ApiServer;
let kubeConfig: KubeConfig;
let core: CoreV1Api;
const namespace = 'client-node';

const pod = (name: string, labels: Record<string, string> = {}): V1Pod => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, labels },
  spec: { containers: [{ name: 'app', image: 'app:1' }] },
});

beforeAll(async () => {
  server = await startApiServer();
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromString(server.kubeconfigYaml());
  core = kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
});
afterAll(() => server.close());

describe('@kubernetes/client-node', () => {
  it('creates, reads, lists, patches and deletes through CoreV1Api', async () => {
    const created = await core.createNamespacedPod({ namespace, body: pod('api-1', { app: 'web' }) });
    expect(created.metadata?.uid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    await core.createNamespacedPod({ namespace, body: pod('api-2', { app: 'db' }) });

    const listed = await core.listNamespacedPod({ namespace, labelSelector: 'app=web' });
    expect(listed.items.map((p) => p.metadata?.name)).toEqual(['api-1']);
    expect(listed.metadata?.resourceVersion).toBe(server.resourceVersion);

    const read = await core.readNamespacedPod({ namespace, name: 'api-1' });
    expect(read.spec?.containers[0]?.image).toBe('app:1');

    const jsonPatched = await core.patchNamespacedPod({ namespace, name: 'api-1', body: [{ op: 'add', path: '/metadata/labels/tier', value: 'front' }] });
    expect(jsonPatched.metadata?.labels).toEqual({ app: 'web', tier: 'front' });
    const mergePatched = await core.patchNamespacedPod(
      { namespace, name: 'api-1', body: { metadata: { labels: { tier: null } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(mergePatched.metadata?.labels).toEqual({ app: 'web' });

    await expect(core.replaceNamespacedPod({ namespace, name: 'api-1', body: read })).rejects.toMatchObject({ code: 409 });
    await expect(core.createNamespacedPod({ namespace: 'missing', body: pod('x') })).rejects.toMatchObject({ code: 404 });

    await core.deleteNamespacedPod({ namespace, name: 'api-2' });
    await expect(core.readNamespacedPod({ namespace, name: 'api-2' })).rejects.toMatchObject({ code: 404 });
    const all = await core.listPodForAllNamespaces();
    expect(all.items.map((p) => p.metadata?.name)).toEqual(['api-1']);
  });

  it('works with the discovery-driven KubernetesObjectApi (strategic merge patch by default)', async () => {
    const objects = KubernetesObjectApi.makeApiClient(kubeConfig);
    const policy = {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'generic', namespace },
      spec: { podSelector: { matchLabels: { app: 'web' } }, policyTypes: ['Ingress'] },
    };
    await objects.create(policy);
    const patched = await objects.patch({ ...policy, metadata: { ...policy.metadata, labels: { patched: 'yes' } } });
    expect(patched.metadata?.labels).toEqual({ patched: 'yes' });
    const read = await objects.read({ apiVersion: policy.apiVersion, kind: policy.kind, metadata: { name: 'generic', namespace } });
    expect((read as KubernetesObject & { spec: unknown }).spec).toEqual(policy.spec);
    await objects.delete(policy);
    expect(server.get('networking.k8s.io/v1', 'NetworkPolicy', namespace, 'generic')).toBeUndefined();
  });

  it('watches with the Watch class, and sees 410 as an ERROR event', async () => {
    const events: [string, string | undefined][] = [];
    let doneWith: unknown = 'not yet';
    const watch = new Watch(kubeConfig);
    const request = await watch.watch(
      `/api/v1/namespaces/${namespace}/pods`,
      { resourceVersion: server.resourceVersion },
      (type, obj: KubernetesObject) => events.push([type, obj.metadata?.name]),
      (error) => {
        doneWith = error;
      },
    );
    await eventually(() => server.openWatches('pods') === 1);
    server.create({ ...pod('watched'), metadata: { name: 'watched', namespace } });
    server.delete('v1', 'Pod', namespace, 'watched');
    await eventually(() => events.length === 2);
    expect(events).toEqual([['ADDED', 'watched'], ['DELETED', 'watched']]);
    server.faults.closeWatches('pods');
    await eventually(() => doneWith !== 'not yet');
    expect(doneWith).toBeNull();
    request.abort();

    const old = server.resourceVersion;
    server.create({ ...pod('after'), metadata: { name: 'after', namespace } });
    server.faults.expireResourceVersions();
    const errors: unknown[] = [];
    let expiredDone = false;
    await watch.watch(
      `/api/v1/namespaces/${namespace}/pods`,
      { resourceVersion: old },
      (type, obj) => {
        if (type === 'ERROR') errors.push(obj);
      },
      () => {
        expiredDone = true;
      },
    );
    await eventually(() => expiredDone);
    expect(errors).toEqual([expect.objectContaining({ kind: 'Status', code: 410, reason: 'Expired' })]);
  });

  it('keeps an informer in sync across closed watches, expired resourceVersions and failed watches', async () => {
    const informer = makeInformer<V1Pod>(kubeConfig, `/api/v1/namespaces/${namespace}/pods`, () => core.listNamespacedPod({ namespace }));
    const added: string[] = [];
    const deleted: string[] = [];
    const errors: unknown[] = [];
    informer.on('add', (obj) => added.push(obj.metadata?.name ?? ''));
    informer.on('delete', (obj) => deleted.push(obj.metadata?.name ?? ''));
    informer.on('error', (error) => errors.push(error));
    server.requests.clear();
    await informer.start();
    await eventually(() => server.openWatches('pods') === 1);
    expect(server.requests.count({ verb: 'list', resource: 'pods' })).toBe(1);
    expect(server.requests.count({ verb: 'watch', resource: 'pods' })).toBe(1);
    expect(added).toEqual(expect.arrayContaining(['api-1', 'after']));

    server.create({ ...pod('inf-1'), metadata: { name: 'inf-1', namespace } });
    await eventually(() => informer.get('inf-1', namespace));

    // A closed watch resumes from the last resourceVersion without a new list.
    server.faults.closeWatches('pods');
    await eventually(() => server.requests.count({ verb: 'watch', resource: 'pods' }) === 2 && server.openWatches('pods') === 1);
    server.create({ ...pod('inf-2'), metadata: { name: 'inf-2', namespace } });
    await eventually(() => informer.get('inf-2', namespace));
    expect(server.requests.count({ verb: 'list', resource: 'pods' })).toBe(1);

    // A change missed while disconnected and then compacted away: the re-watch (held back by latency) gets
    // 410 Expired, the informer lists again and notices the deletion.
    server.faults.setLatency(300);
    server.faults.closeWatches('pods');
    server.delete('v1', 'Pod', namespace, 'inf-1');
    server.faults.expireResourceVersions();
    server.faults.setLatency(0);
    await eventually(() => deleted.includes('inf-1'));
    expect(server.requests.count({ verb: 'list', resource: 'pods' })).toBe(2);
    expect(informer.list(namespace).map((p) => p.metadata?.name).sort()).toEqual(['after', 'api-1', 'inf-2']);

    // client-node hands a failed watch to the error callback and stops; a restart recovers.
    server.faults.failNextWatch('pods', 500);
    server.faults.closeWatches('pods');
    await eventually(() => errors.length === 1);
    expect(errors[0]).toMatchObject({ statusCode: 500 });
    await informer.start();
    server.create({ ...pod('inf-3'), metadata: { name: 'inf-3', namespace } });
    await eventually(() => informer.get('inf-3', namespace));
    await informer.stop();
  });
});
