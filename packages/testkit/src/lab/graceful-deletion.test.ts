// Graceful pod deletion end to end: the embedded API server marks a deleted pod (gracefulPodDeletion), the lab's
// kubelet keeps it running through its preStop sleep (a serving, terminating endpoint that still answers), then stops
// it (Ready=False), tears its sandbox down and removes it; the EndpointSlice controller shows each step.
import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer } from '../apiserver/server.js';
import type { ApiServer } from '../apiserver/server.js';
import type { EndpointSliceObject } from '../apiserver/endpointslice-reconciler.js';
import { WatchClient } from '../apiserver/testing/http-client.js';
import type { WatchEventJson } from '../apiserver/testing/http-client.js';
import { waitFor } from '../wait.js';
import { startLab } from './lab.js';
import type { Lab } from './lab.js';
import { LAB_POD_IMAGE } from './pod-objects.js';
import { labSkipReason, processesMentioning } from './testing/preconditions.js';

const skipReason = labSkipReason();
const suffix = skipReason ? ` (skipped: ${skipReason})` : '';
const NS = 'term';
const PORT = 8080;

describe.skipIf(skipReason !== undefined)(`graceful pod deletion in the lab${suffix}`, () => {
  let api: ApiServer;
  let lab: Lab;

  beforeAll(async () => {
    api = await startApiServer({ port: 0, gracefulPodDeletion: true, endpointSliceController: true });
    lab = await startLab({ apiServer: api, podCidrs: ['10.244.0.0/24', 'fd00:10:244::/64'] });
    await lab.addPod({ namespace: NS, name: 'client' });
    api.create({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: NS },
      spec: { selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: PORT }] },
    });
  });

  afterAll(async () => {
    await lab?.stop();
    await api?.close();
  });

  /** A web pod on the lab node whose container sleeps `preStopSeconds` in its preStop hook. */
  async function addWebPod(name: string, preStopSeconds: number | undefined, spec: Partial<NonNullable<V1Pod['spec']>> = {}) {
    const pod: V1Pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: NS, labels: { app: 'web' } },
      spec: {
        nodeName: lab.nodeName,
        containers: [
          {
            name: 'web',
            image: LAB_POD_IMAGE,
            ports: [{ containerPort: PORT, protocol: 'TCP' }],
            ...(preStopSeconds !== undefined ? { lifecycle: { preStop: { sleep: { seconds: preStopSeconds } } } } : {}),
          },
        ],
        ...spec,
      },
    };
    api.create(pod);
    return lab.waitForPod({ namespace: NS, name });
  }

  const endpointsOf = (name: string) =>
    (api.list('discovery.k8s.io/v1', 'EndpointSlice', NS, { labelSelector: 'kubernetes.io/service-name=web' }) as EndpointSliceObject[])
      .flatMap((slice) => slice.endpoints ?? [])
      .filter((endpoint) => endpoint.targetRef?.name === name);
  const conditionsOf = (name: string) => endpointsOf(name).map((endpoint) => endpoint.conditions);
  const readyOf = (event: WatchEventJson) =>
    ((event.object.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions ?? []).find((c) => c.type === 'Ready')?.status;

  it('keeps a pod with a preStop sleep serving as a terminating endpoint that answers, then removes it', async () => {
    const preStopSeconds = 3;
    const pod = await addWebPod('slow', preStopSeconds);
    await waitFor('slow ready in its slice', () => conditionsOf('slow').length === 1 && conditionsOf('slow')[0]?.ready === true, 10_000);
    const watch = await WatchClient.open(`${api.url}/api/v1/namespaces/${NS}/pods?watch=true&fieldSelector=metadata.name=slow&resourceVersion=${api.resourceVersion}`);
    try {
      const deletedAt = Date.now();
      const marked = api.delete('v1', 'Pod', NS, 'slow');
      expect(marked.metadata.deletionGracePeriodSeconds).toBe(30);

      await waitFor('slow serving and terminating', () => conditionsOf('slow')[0]?.terminating === true, 5_000);
      expect(conditionsOf('slow')).toEqual([{ ready: false, serving: true, terminating: true }]);
      // Still running: its agent answers on the port, from another pod, for as long as the slice says serving.
      expect(await lab.probe({ namespace: NS, name: 'client' }, pod.ipv4 as string, PORT)).toBe(true);
      expect(lab.pods().map((running) => running.name)).toContain('slow');
      const probedAt = Date.now();
      expect(probedAt - deletedAt).toBeLessThan(preStopSeconds * 1000);

      await waitFor('slow gone from its slice', () => endpointsOf('slow').length === 0, (preStopSeconds + 10) * 1000);
      const goneAt = Date.now();
      expect(goneAt - deletedAt).toBeGreaterThanOrEqual(preStopSeconds * 1000);
      await waitFor('slow gone from the API', () => api.get('v1', 'Pod', NS, 'slow') === undefined, 5_000);
      expect(lab.pods().map((running) => running.name)).not.toContain('slow');
      expect(processesMentioning(pod.netns)).toEqual([]);
      expect(await lab.probe({ namespace: NS, name: 'client' }, pod.ipv4 as string, PORT)).toBe(false);

      // What a watcher saw: the mark (still Ready), the containers stopping (Ready=False), then the deletion.
      const events: WatchEventJson[] = [];
      for (;;) {
        const event = await watch.next({ timeoutMs: 2_000 });
        events.push(event);
        if (event.type === 'DELETED') break;
      }
      expect(events[0]).toMatchObject({ type: 'MODIFIED', object: { metadata: { deletionGracePeriodSeconds: 30 } } });
      expect(readyOf(events[0]!)).toBe('True');
      expect(events.slice(0, -1).map(readyOf)).toContain('False');
      expect(readyOf(events.at(-2)!)).toBe('False');
    } finally {
      watch.close();
    }
  });

  it('holds a pod no longer than its grace period, and removes one without a preStop hook at once', async () => {
    await addWebPod('bounded', 60, { terminationGracePeriodSeconds: 2 });
    await addWebPod('plain', undefined);
    const deletedAt = Date.now();
    api.delete('v1', 'Pod', NS, 'bounded');
    await lab.deletePod({ namespace: NS, name: 'plain' });
    const plainGoneAt = Date.now();
    expect(plainGoneAt - deletedAt).toBeLessThan(2_000);
    await waitFor('plain gone from the API', () => api.get('v1', 'Pod', NS, 'plain') === undefined, 5_000);
    expect(api.get('v1', 'Pod', NS, 'bounded')?.metadata.deletionTimestamp).toBeDefined();

    await waitFor('bounded gone from the API', () => api.get('v1', 'Pod', NS, 'bounded') === undefined, 10_000);
    const boundedGoneAt = Date.now();
    expect(boundedGoneAt - deletedAt).toBeGreaterThanOrEqual(2_000);
    expect(boundedGoneAt - deletedAt).toBeLessThan(8_000);
  });

  it('cuts the preStop sleep short when a second DELETE shortens the grace to 0', async () => {
    await addWebPod('forced', 60);
    api.delete('v1', 'Pod', NS, 'forced');
    await waitFor('forced terminating', () => conditionsOf('forced')[0]?.terminating === true, 5_000);
    const forcedAt = Date.now();
    api.delete('v1', 'Pod', NS, 'forced', { gracePeriodSeconds: 0 });
    await waitFor('forced sandbox gone', () => !lab.pods().some((running) => running.name === 'forced'), 5_000);
    expect(Date.now() - forcedAt).toBeLessThan(3_000);
  });
});
