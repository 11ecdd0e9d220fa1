// The reconciler alone, for what the embedded server cannot store: a terminating pod (the server deletes at once, so
// no stored pod has a deletionTimestamp) and the slices kube-controller-manager would keep across syncs.
import { describe, expect, it } from 'vitest';
import type { KubeObject } from './kube-object.js';
import type { EndpointSliceObject, ReconcileInput } from './endpointslice-reconciler.js';
import { reconcileEndpointSlices } from './endpointslice-reconciler.js';

const service: KubeObject = {
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: 'web', namespace: 'ns', uid: 'svc-uid', labels: { team: 'net' } },
  spec: { selector: { app: 'web' }, clusterIP: '10.96.0.10', ipFamilies: ['IPv4'], ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }] },
};

function pod(name: string, options: { ip: string; ready?: boolean; deleting?: boolean; node?: string; phase?: string }): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'ns', uid: `${name}-uid`, labels: { app: 'web' }, ...(options.deleting && { deletionTimestamp: '2026-01-01T00:00:00Z' }) },
    spec: { nodeName: options.node ?? 'node-a', containers: [{ name: 'app', image: 'app:1' }] },
    status: { phase: options.phase ?? 'Running', podIPs: [{ ip: options.ip }], conditions: [{ type: 'Ready', status: options.ready === false ? 'False' : 'True' }] },
  };
}

const nodes: Record<string, KubeObject> = { 'node-a': { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a' } } };

function reconcile(overrides: Partial<ReconcileInput>) {
  return reconcileEndpointSlices({ service, pods: [], node: (name) => nodes[name], existing: [], ...overrides });
}

/** A plan's created slice as the store would keep it: named, with a resourceVersion. */
function stored(slice: EndpointSliceObject, name: string): EndpointSliceObject {
  const { generateName: _generated, ...metadata } = slice.metadata;
  return { ...slice, metadata: { ...metadata, name, resourceVersion: '7' } };
}

describe('reconcileEndpointSlices', () => {
  it('keeps a terminating pod as serving but not ready (ready with publishNotReadyAddresses), and drops finished pods', () => {
    const pods = [pod('going', { ip: '10.0.0.1', deleting: true }), pod('going-unready', { ip: '10.0.0.2', deleting: true, ready: false }), pod('done', { ip: '10.0.0.3', phase: 'Succeeded' })];
    const conditions = (input: Partial<ReconcileInput>) =>
      Object.fromEntries(reconcile({ pods, ...input }).create[0]!.endpoints.map((e) => [e.targetRef?.name, e.conditions]));
    expect(conditions({})).toEqual({
      going: { ready: false, serving: true, terminating: true },
      'going-unready': { ready: false, serving: false, terminating: true },
    });
    const published = { ...service, spec: { ...(service.spec as object), publishNotReadyAddresses: true } };
    expect(conditions({ service: published })).toEqual({
      going: { ready: true, serving: true, terminating: true },
      'going-unready': { ready: true, serving: false, terminating: true },
    });
  });

  it('copies the Service labels, marks headless Services, and leaves out pods whose Node is missing', () => {
    const headless = { ...service, spec: { ...(service.spec as object), clusterIP: 'None' } };
    const plan = reconcile({ service: headless, pods: [pod('a', { ip: '10.0.0.1' }), pod('b', { ip: '10.0.0.2', node: 'gone' })] });
    expect(plan.create).toHaveLength(1);
    expect(plan.create[0]!.metadata.labels).toEqual({
      team: 'net',
      'service.kubernetes.io/headless': '',
      'kubernetes.io/service-name': 'web',
      'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io',
    });
    expect(plan.create[0]!.endpoints.map((e) => e.targetRef?.name)).toEqual(['a']);
    expect(plan.podsWithoutNode).toEqual(['ns/b']);
  });

  it('changes nothing when nothing changed, updates in place when a pod changes, and reuses a slice it would delete', () => {
    const first = reconcile({ pods: [pod('a', { ip: '10.0.0.1' })] });
    const slice = stored(first.create[0]!, 'web-abcde');
    expect(reconcile({ pods: [pod('a', { ip: '10.0.0.1' })], existing: [slice] })).toEqual({ create: [], update: [], delete: [], podsWithoutNode: [] });

    const notReady = reconcile({ pods: [pod('a', { ip: '10.0.0.1', ready: false })], existing: [slice] });
    expect(notReady.create).toEqual([]);
    expect(notReady.update.map((s) => [s.metadata.name, s.metadata.resourceVersion, s.endpoints[0]!.conditions.ready])).toEqual([['web-abcde', '7', false]]);

    // The pod is replaced by another: the slice that would go empty is rewritten instead of deleted and recreated.
    const replaced = reconcile({ pods: [pod('b', { ip: '10.0.0.2' })], existing: [slice] });
    expect(replaced.create).toEqual([]);
    expect(replaced.delete).toEqual([]);
    expect(replaced.update.map((s) => [s.metadata.name, s.endpoints.map((e) => e.targetRef?.name)])).toEqual([['web-abcde', ['b']]]);

    // A slice of an older Service of the same name (another uid) goes; a slice of a family the Service lost goes.
    const foreign = { ...slice, metadata: { ...slice.metadata, name: 'web-old', ownerReferences: [{ apiVersion: 'v1', kind: 'Service', uid: 'old' }] } };
    const ipv6 = { ...slice, metadata: { ...slice.metadata, name: 'web-six' }, addressType: 'IPv6' };
    const cleaned = reconcile({ pods: [pod('a', { ip: '10.0.0.1' })], existing: [slice, foreign, ipv6] });
    expect(cleaned.delete.map((s) => s.metadata.name).sort()).toEqual(['web-old', 'web-six']);
    expect(cleaned.update).toEqual([]);
  });

  it('honours maxEndpointsPerSlice and fills an unchanged slice before creating one', () => {
    const pods = Array.from({ length: 7 }, (_, index) => pod(`p${index}`, { ip: `10.0.0.${index + 1}` }));
    const first = reconcile({ pods: pods.slice(0, 2), maxEndpointsPerSlice: 4 });
    const slice = stored(first.create[0]!, 'web-aaaaa');
    // Five new endpoints: a full new slice of four, then the one left fits into the existing slice (getSliceToFill).
    const next = reconcile({ pods, existing: [slice], maxEndpointsPerSlice: 4 });
    expect(next.create.map((s) => s.endpoints.length)).toEqual([4]);
    expect(next.update.map((s) => [s.metadata.name, s.endpoints.length])).toEqual([['web-aaaaa', 3]]);
  });
});
