// The EndpointSlice controller with the lab's kubelet: pods that really run (a netns each, addresses from the node's
// pod CIDRs, Ready once their agent listens) become endpoints, and a deleted pod leaves its slice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, waitFor } from '../index.js';
import type { ApiServer } from '../index.js';
import { startLab } from '../lab/lab.js';
import type { Lab } from '../lab/lab.js';
import { labSkipReason } from '../lab/testing/preconditions.js';
import type { EndpointSliceObject } from './endpointslice-reconciler.js';

const skipReason = labSkipReason();
const suffix = skipReason ? ` (skipped: ${skipReason})` : '';

describe.skipIf(skipReason !== undefined)(`EndpointSlices of lab pods${suffix}`, () => {
  let api: ApiServer;
  let lab: Lab;

  beforeAll(async () => {
    api = await startApiServer({ port: 0, endpointSliceController: true });
    lab = await startLab({ apiServer: api, podCidrs: ['10.244.0.0/24', 'fd00:10:244::/64'] });
  });

  afterAll(async () => {
    await lab?.stop();
    await api?.close();
  });

  const slices = () =>
    api.list('discovery.k8s.io/v1', 'EndpointSlice', 'eps', { labelSelector: 'kubernetes.io/service-name=web' }) as EndpointSliceObject[];
  const endpointsOf = (family: string) => slices().filter((slice) => slice.addressType === family).flatMap((slice) => slice.endpoints ?? []);

  it('keeps a slice per family with the running pods, ready, on the lab node, the named port resolved', async () => {
    const ports = [{ port: 8080, protocol: 'TCP' as const, name: 'http' }];
    const [a, b] = await Promise.all(['a', 'b'].map((name) => lab.addPod({ namespace: 'eps', name, labels: { app: 'web' }, ports })));
    api.create({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: 'eps' },
      spec: { selector: { app: 'web' }, ipFamilyPolicy: 'RequireDualStack', ports: [{ name: 'web', port: 80, targetPort: 'http' }] },
    });
    await waitFor('both pods in both slices', () => endpointsOf('IPv4').length === 2 && endpointsOf('IPv6').length === 2, 10_000);

    for (const family of ['IPv4', 'IPv6'] as const) {
      const expected = [a!, b!].map((pod) => ({
        addresses: [family === 'IPv4' ? pod.ipv4 : pod.ipv6],
        conditions: { ready: true, serving: true, terminating: false },
        nodeName: lab.nodeName,
        targetRef: { kind: 'Pod', namespace: 'eps', name: pod.name, uid: pod.uid },
      }));
      expect([...endpointsOf(family)].sort((x, y) => (x.targetRef?.name ?? '').localeCompare(y.targetRef?.name ?? ''))).toEqual(expected);
    }
    expect(slices().map((slice) => slice.ports)).toEqual([
      [{ name: 'web', port: 8080, protocol: 'TCP' }],
      [{ name: 'web', port: 8080, protocol: 'TCP' }],
    ]);
  });

  it('drops a deleted pod from its slices', async () => {
    // The embedded server deletes a pod at once (no deletionTimestamp, no grace period), so the endpoint goes without
    // ever showing terminating: a proxy's terminating-endpoint fallback cannot be seen in this lab yet.
    await lab.deletePod('eps/a');
    await waitFor('pod a gone from both slices', () => endpointsOf('IPv4').length === 1 && endpointsOf('IPv6').length === 1, 10_000);
    expect([...endpointsOf('IPv4'), ...endpointsOf('IPv6')].map((endpoint) => endpoint.targetRef?.name)).toEqual(['b', 'b']);
  });
});
