// The embedded API server's EndpointSlice controller, seen from outside: objects written through the server's API,
// slices read back from it, a watch over HTTP and kubectl.
import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiServer, KubeObject } from '../index.js';
import { startApiServer, waitFor } from '../index.js';
import type { Endpoint, EndpointSliceObject } from './endpointslice-reconciler.js';
import { WatchClient } from './testing/http-client.js';

const hasKubectl = spawnSync('kubectl', ['version', '--client'], { timeout: 10_000 }).status === 0;
if (!hasKubectl) console.warn('endpointslice-controller.test.ts: the kubectl case is skipped, kubectl is not installed');

let server: ApiServer;
let workDir: string;

beforeAll(async () => {
  workDir = await mkdtemp(join(tmpdir(), `krt-eps-${randomBytes(3).toString('hex')}-`));
  server = await startApiServer({ endpointSliceController: true });
  server.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a', labels: { 'topology.kubernetes.io/zone': 'zone-a' } } });
  server.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-b' } });
});

afterAll(async () => {
  await server?.close();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

let namespaceCount = 0;
function namespace(): string {
  const name = `eps-${++namespaceCount}`;
  server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  return name;
}

interface PodSpec {
  ips: string[];
  labels?: Record<string, string>;
  ready?: boolean;
  node?: string;
  ports?: { name: string; containerPort: number; protocol?: string }[];
}

function createPod(ns: string, name: string, spec: PodSpec): KubeObject {
  return server.create({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns, labels: spec.labels ?? { app: 'web' } },
    spec: { nodeName: spec.node ?? 'node-a', containers: [{ name: 'app', image: 'app:1', ports: spec.ports ?? [] }] },
    status: {
      phase: 'Running',
      podIP: spec.ips[0],
      podIPs: spec.ips.map((ip) => ({ ip })),
      conditions: [{ type: 'Ready', status: spec.ready === false ? 'False' : 'True' }],
    },
  } as KubeObject);
}

function createService(ns: string, name: string, spec: Record<string, unknown>): KubeObject {
  return server.create({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: ns }, spec } as KubeObject);
}

function slicesOf(ns: string, service: string): EndpointSliceObject[] {
  return server.list('discovery.k8s.io/v1', 'EndpointSlice', ns, { labelSelector: `kubernetes.io/service-name=${service}` }) as EndpointSliceObject[];
}

/** The slices of a Service once `check` holds for them (the controller works on a later turn of the event loop). */
async function slicesWhen(ns: string, service: string, what: string, check: (slices: EndpointSliceObject[]) => boolean): Promise<EndpointSliceObject[]> {
  await waitFor(`${ns}/${service}: ${what}`, () => check(slicesOf(ns, service)), { timeoutMs: 5_000, intervalMs: 10 });
  return slicesOf(ns, service);
}

const byPod = (endpoints: Endpoint[]) => [...endpoints].sort((a, b) => (a.targetRef?.name ?? '').localeCompare(b.targetRef?.name ?? ''));

describe('EndpointSlice controller of the embedded API server', () => {
  it('keeps a slice with both pods of a Service, labelled, named and owned as kube-controller-manager does', async () => {
    const ns = namespace();
    const pod1 = createPod(ns, 'web-1', { ips: ['10.244.0.11'], ports: [{ name: 'http', containerPort: 8080 }] });
    createPod(ns, 'web-2', { ips: ['10.244.0.12'], node: 'node-b' });
    createPod(ns, 'other', { ips: ['10.244.0.13'], labels: { app: 'other' } });
    const service = createService(ns, 'web', { selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] });

    const [slice] = await slicesWhen(ns, 'web', 'two endpoints', (slices) => slices[0]?.endpoints.length === 2);
    expect(slicesOf(ns, 'web')).toHaveLength(1);
    expect(slice!.metadata.name).toMatch(/^web-[a-z0-9]{5}$/);
    expect(slice!.metadata.labels).toEqual({
      'kubernetes.io/service-name': 'web',
      'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io',
    });
    expect(slice!.metadata.ownerReferences).toEqual([
      { apiVersion: 'v1', kind: 'Service', name: 'web', uid: service.metadata.uid, controller: true, blockOwnerDeletion: true },
    ]);
    expect(slice!.addressType).toBe('IPv4');
    expect(slice!.ports).toEqual([{ name: 'http', port: 8080, protocol: 'TCP' }]);
    expect(byPod(slice!.endpoints)).toEqual([
      {
        addresses: ['10.244.0.11'],
        conditions: { ready: true, serving: true, terminating: false },
        nodeName: 'node-a',
        zone: 'zone-a',
        targetRef: { kind: 'Pod', namespace: ns, name: 'web-1', uid: pod1.metadata.uid },
      },
      expect.objectContaining({ addresses: ['10.244.0.12'], nodeName: 'node-b', targetRef: expect.objectContaining({ name: 'web-2' }) }),
    ]);
    expect(byPod(slice!.endpoints)[1]!.zone).toBeUndefined();
    expect(slice!.metadata.annotations?.['endpoints.kubernetes.io/last-change-trigger-time']).toMatch(/^\d{4}-\d\d-\d\dT/);
  });

  it('flips ready (and serving) when a pod Ready condition flips, and publishes not-ready addresses when asked', async () => {
    const ns = namespace();
    createPod(ns, 'web-1', { ips: ['10.244.1.11'] });
    createService(ns, 'web', { selector: { app: 'web' }, ports: [{ port: 80 }] });
    createService(ns, 'web-all', { selector: { app: 'web' }, ports: [{ port: 80 }], publishNotReadyAddresses: true });
    await slicesWhen(ns, 'web', 'a ready endpoint', (slices) => slices[0]?.endpoints[0]?.conditions.ready === true);

    server.patchStatus('v1', 'Pod', ns, 'web-1', { status: { conditions: [{ type: 'Ready', status: 'False' }] } }, 'merge');
    const [notReady] = await slicesWhen(ns, 'web', 'a not-ready endpoint', (slices) => slices[0]?.endpoints[0]?.conditions.ready === false);
    expect(notReady!.endpoints[0]!.conditions).toEqual({ ready: false, serving: false, terminating: false });
    const [published] = await slicesWhen(ns, 'web-all', 'a not-serving endpoint', (slices) => slices[0]?.endpoints[0]?.conditions.serving === false);
    expect(published!.endpoints[0]!.conditions).toEqual({ ready: true, serving: false, terminating: false });

    server.patchStatus('v1', 'Pod', ns, 'web-1', { status: { conditions: [{ type: 'Ready', status: 'True' }] } }, 'merge');
    await slicesWhen(ns, 'web', 'ready again', (slices) => slices[0]?.endpoints[0]?.conditions.ready === true);
  });

  it('resolves a named targetPort per pod: pods whose port differs land in different slices', async () => {
    const ns = namespace();
    createPod(ns, 'v1-a', { ips: ['10.244.2.11'], ports: [{ name: 'http', containerPort: 8080 }] });
    createPod(ns, 'v1-b', { ips: ['10.244.2.12'], ports: [{ name: 'http', containerPort: 8080 }] });
    createPod(ns, 'v2', { ips: ['10.244.2.13'], ports: [{ name: 'http', containerPort: 9090 }] });
    // The named port exists only for UDP here, so this pod serves no TCP port: a slice without ports, as upstream.
    createPod(ns, 'udp-only', { ips: ['10.244.2.14'], ports: [{ name: 'http', containerPort: 7070, protocol: 'UDP' }] });
    createService(ns, 'web', { selector: { app: 'web' }, ports: [{ name: 'web', port: 80, targetPort: 'http' }] });

    const slices = await slicesWhen(ns, 'web', 'three port groups', (found) => found.reduce((sum, slice) => sum + slice.endpoints.length, 0) === 4);
    const byPort = new Map(slices.map((slice) => [slice.ports[0]?.port ?? 'none', slice.endpoints.map((e) => e.targetRef?.name).sort()]));
    expect(byPort).toEqual(
      new Map<number | string, (string | undefined)[]>([
        [8080, ['v1-a', 'v1-b']],
        [9090, ['v2']],
        ['none', ['udp-only']],
      ]),
    );
    expect(slices.find((slice) => slice.ports[0]?.port === 9090)!.ports).toEqual([{ name: 'web', port: 9090, protocol: 'TCP' }]);
  });

  it('keeps one slice per family of a dual-stack Service, and only the IPv6 one for an IPv6 single-stack Service', async () => {
    const ns = namespace();
    createPod(ns, 'web-1', { ips: ['10.244.3.11', 'fd00:10:244:3:0:0:0:11'] });
    createPod(ns, 'web-2', { ips: ['10.244.3.12', 'fd00:10:244:3::12'] });
    createService(ns, 'dual', { selector: { app: 'web' }, ports: [{ port: 80 }], ipFamilyPolicy: 'RequireDualStack' });
    createService(ns, 'six', { selector: { app: 'web' }, ports: [{ port: 80 }], ipFamilies: ['IPv6'] });

    const dual = await slicesWhen(ns, 'dual', 'two families', (slices) => slices.length === 2 && slices.every((s) => s.endpoints.length === 2));
    const addresses = (family: string) =>
      dual
        .filter((slice) => slice.addressType === family)
        .flatMap((slice) => slice.endpoints.flatMap((e) => e.addresses))
        .sort();
    expect(addresses('IPv4')).toEqual(['10.244.3.11', '10.244.3.12']);
    // Written in canonical form, as upstream re-stringifies every address.
    expect(addresses('IPv6')).toEqual(['fd00:10:244:3::11', 'fd00:10:244:3::12']);
    const six = await slicesWhen(ns, 'six', 'the IPv6 slice', (slices) => slices[0]?.endpoints.length === 2);
    expect(six.map((slice) => slice.addressType)).toEqual(['IPv6']);
  });

  it('leaves a Service without a selector alone, and keeps a placeholder slice for a selector that matches nothing', async () => {
    const ns = namespace();
    createPod(ns, 'web-1', { ips: ['10.244.4.11'] });
    createService(ns, 'manual', { ports: [{ port: 80 }] });
    const userSlice = server.create({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'manual-1', namespace: ns, labels: { 'kubernetes.io/service-name': 'manual' } },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['192.0.2.10'] }],
      ports: [{ port: 80 }],
    });
    // An empty selector is none: in a cluster `selector: {}` reads back as absent.
    createService(ns, 'empty', { selector: {}, ports: [{ port: 80 }] });
    createService(ns, 'nobody', { selector: { app: 'nobody' }, ports: [{ port: 80 }] });
    const [placeholder] = await slicesWhen(ns, 'nobody', 'a placeholder', (slices) => slices.length === 1);
    expect(placeholder!.endpoints ?? []).toEqual([]);
    expect(placeholder!.ports ?? []).toEqual([]);
    // The placeholder shows the controller has run; the user's slice is exactly as written.
    expect(slicesOf(ns, 'manual')).toEqual([userSlice]);
    expect(slicesOf(ns, 'empty')).toEqual([]);
  });

  it('deletes the slices of a Service that goes, and repairs a slice someone else deleted', async () => {
    const ns = namespace();
    createPod(ns, 'web-1', { ips: ['10.244.5.11', 'fd00:10:244:5::11'] });
    createService(ns, 'web', { selector: { app: 'web' }, ports: [{ port: 80 }], ipFamilyPolicy: 'PreferDualStack' });
    const [first] = await slicesWhen(ns, 'web', 'two slices', (slices) => slices.length === 2);

    server.delete('discovery.k8s.io/v1', 'EndpointSlice', ns, first!.metadata.name!);
    await slicesWhen(ns, 'web', 'the deleted slice recreated', (slices) => slices.length === 2 && slices.every((slice) => slice.endpoints.length === 1));

    server.delete('v1', 'Service', ns, 'web');
    await slicesWhen(ns, 'web', 'no slices', (slices) => slices.length === 0);
  });

  it('follows pods that come, go and change labels, a Service whose selector changes, and Nodes that get a zone', async () => {
    const ns = namespace();
    createService(ns, 'web', { selector: { app: 'web' }, ports: [{ port: 80 }] });
    createPod(ns, 'web-1', { ips: ['10.244.6.11'], node: 'node-b' });
    await slicesWhen(ns, 'web', 'one endpoint', (slices) => slices[0]?.endpoints.length === 1);
    createPod(ns, 'web-2', { ips: ['10.244.6.12'] });
    await slicesWhen(ns, 'web', 'two endpoints', (slices) => slices[0]?.endpoints.length === 2);
    server.patch('v1', 'Pod', ns, 'web-2', { metadata: { labels: { app: 'api' } } }, 'merge');
    await slicesWhen(ns, 'web', 'web-2 gone by its label', (slices) => slices[0]?.endpoints.length === 1);
    server.patch('v1', 'Service', ns, 'web', { spec: { selector: { app: 'api' } } }, 'merge');
    await slicesWhen(ns, 'web', 'only web-2', (slices) => slices[0]?.endpoints.map((e) => e.targetRef?.name).join() === 'web-2');
    server.delete('v1', 'Pod', ns, 'web-2');
    await slicesWhen(ns, 'web', 'the placeholder', (slices) => slices.length === 1 && (slices[0]?.endpoints ?? []).length === 0);

    // A pod on a Node that does not exist yet is left out (as upstream), and comes in with its Node.
    createPod(ns, 'late', { ips: ['10.244.6.13'], labels: { app: 'api' }, node: 'node-late' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(slicesOf(ns, 'web')[0]!.endpoints ?? []).toEqual([]);
    server.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-late' } });
    await slicesWhen(ns, 'web', 'the pod of the new Node', (slices) => slices[0]?.endpoints.length === 1);
    server.patch('v1', 'Node', undefined, 'node-late', { metadata: { labels: { 'topology.kubernetes.io/zone': 'zone-late' } } }, 'merge');
    await slicesWhen(ns, 'web', 'the zone of the Node', (slices) => slices[0]?.endpoints[0]?.zone === 'zone-late');
  });

  it('writes hints for trafficDistribution: forZones for PreferClose, forNodes and forZones for PreferSameNode, none otherwise', async () => {
    const ns = namespace();
    createPod(ns, 'web-1', { ips: ['10.244.7.11'] });
    createPod(ns, 'web-2', { ips: ['10.244.7.12'], node: 'node-b' });
    createPod(ns, 'web-3', { ips: ['10.244.7.13'], ready: false });
    createService(ns, 'close', { selector: { app: 'web' }, ports: [{ port: 80 }], trafficDistribution: 'PreferClose' });
    createService(ns, 'node', { selector: { app: 'web' }, ports: [{ port: 80 }], trafficDistribution: 'PreferSameNode' });
    const hints = async (service: string) => {
      const [slice] = await slicesWhen(ns, service, 'three endpoints', (slices) => slices[0]?.endpoints.length === 3);
      return Object.fromEntries(slice!.endpoints.map((e) => [e.targetRef?.name, e.hints]));
    };
    // web-2's Node has no zone and web-3 is not ready: neither gets a zone hint.
    expect(await hints('close')).toEqual({ 'web-1': { forZones: [{ name: 'zone-a' }] }, 'web-2': undefined, 'web-3': undefined });
    expect(await hints('node')).toEqual({
      'web-1': { forZones: [{ name: 'zone-a' }], forNodes: [{ name: 'node-a' }] },
      'web-2': { forNodes: [{ name: 'node-b' }] },
      'web-3': undefined,
    });
    server.patch('v1', 'Service', ns, 'close', { spec: { trafficDistribution: null } }, 'merge');
    await slicesWhen(ns, 'close', 'hints removed', (slices) => slices[0]?.endpoints.every((e) => e.hints === undefined) === true);
  });

  it('writes through the store, so a watch over HTTP sees the slice ADDED, MODIFIED and DELETED', async () => {
    const ns = namespace();
    const watch = await WatchClient.open(`${server.url}/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices?watch=true&resourceVersion=${server.resourceVersion}`);
    try {
      createService(ns, 'web', { selector: { app: 'web' }, ports: [{ port: 80 }] });
      const added = await watch.next();
      expect([added.type, added.object.endpoints ?? []]).toEqual(['ADDED', []]);
      createPod(ns, 'web-1', { ips: ['10.244.10.11'] });
      const modified = await watch.next();
      expect(modified.type).toBe('MODIFIED');
      expect(modified.object.metadata?.name).toBe(added.object.metadata?.name);
      expect((modified.object.endpoints as Endpoint[]).map((e) => e.addresses)).toEqual([['10.244.10.11']]);
      server.delete('v1', 'Service', ns, 'web');
      const deleted = await watch.next();
      expect([deleted.type, deleted.object.metadata?.name]).toEqual(['DELETED', added.object.metadata?.name]);
    } finally {
      watch.close();
    }
  });

  it('splits at 100 endpoints per slice, and syncs a Service once for many events', async () => {
    const ns = namespace();
    createService(ns, 'web', { selector: { app: 'web' }, ports: [{ port: 80 }] });
    // 150 pod events in one turn of the event loop queue the Service once: each slice is written once.
    for (let index = 0; index < 150; index++) createPod(ns, `web-${index}`, { ips: [`10.244.8.${index + 1}`] });
    const slices = await slicesWhen(ns, 'web', '150 endpoints', (found) => found.reduce((sum, slice) => sum + slice.endpoints.length, 0) === 150);
    expect(slices.map((slice) => slice.endpoints.length).sort((a, b) => a - b)).toEqual([50, 100]);
    expect(slices.map((slice) => slice.metadata.generation)).toEqual([1, 1]);
  });

  it('creates the kubernetes Service and its EndpointSlice, and recreates the slice when it is deleted', async () => {
    await slicesWhen('default', 'kubernetes', 'the kubernetes slice', (slices) => slices.length === 1);
    const service = server.get('v1', 'Service', 'default', 'kubernetes');
    expect(service?.metadata.labels).toEqual({ component: 'apiserver', provider: 'kubernetes' });
    expect(service?.spec).toMatchObject({ clusterIP: '10.96.0.1', ports: [{ name: 'https', port: 443, protocol: 'TCP', targetPort: server.port }] });
    const expected = {
      addressType: 'IPv4',
      endpoints: [{ addresses: ['127.0.0.1'], conditions: { ready: true } }],
      ports: [{ name: 'https', port: server.port, protocol: 'TCP' }],
    };
    expect(slicesOf('default', 'kubernetes')).toEqual([expect.objectContaining({ ...expected, metadata: expect.objectContaining({ name: 'kubernetes' }) })]);
    server.delete('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'kubernetes');
    await slicesWhen('default', 'kubernetes', 'the slice back', (slices) => slices.length === 1);
  });

  it('records a Warning Event on a Service whose slices the server refuses, and retries', async () => {
    // Services stored unvalidated can carry a label no EndpointSlice may have (a number); the slice's create is refused.
    const lax = await startApiServer({ endpointSliceController: true, validation: { except: ['services'] } });
    try {
      lax.create({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', labels: { tier: 42 as unknown as string } }, spec: { selector: { app: 'web' } } });
      const events = () => lax.list('v1', 'Event', 'default', { fieldSelector: 'involvedObject.name=web' });
      await waitFor('a Warning Event', () => events().length > 0, { timeoutMs: 5_000, intervalMs: 10 });
      expect(events()[0]).toMatchObject({
        type: 'Warning',
        reason: 'FailedToUpdateEndpointSlices',
        message: expect.stringMatching(/^Error updating Endpoint Slices for Service default\/web: .*labels/),
        involvedObject: { kind: 'Service', name: 'web' },
      });
      // Fixed, the next retry writes the slice; one Event for the run of failures.
      lax.patch('v1', 'Service', 'default', 'web', { metadata: { labels: { tier: 'ok' } } }, 'merge');
      const [slice] = await (async () => {
        await waitFor('the slice', () => lax.list('discovery.k8s.io/v1', 'EndpointSlice', 'default', { labelSelector: 'kubernetes.io/service-name=web' }).length === 1, 5_000);
        return lax.list('discovery.k8s.io/v1', 'EndpointSlice', 'default', { labelSelector: 'kubernetes.io/service-name=web' });
      })();
      expect(slice!.metadata.labels?.tier).toBe('ok');
      expect(events()).toHaveLength(1);
    } finally {
      await lax.close();
    }
  });

  it('is not there unless asked for', async () => {
    const plain = await startApiServer();
    try {
      plain.create({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a' } });
      createPodIn(plain);
      plain.create({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'web' }, spec: { selector: { app: 'web' }, ports: [{ port: 80 }] } });
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(plain.list('discovery.k8s.io/v1', 'EndpointSlice')).toEqual([]);
      expect(plain.get('v1', 'Service', 'default', 'kubernetes')).toBeUndefined();
    } finally {
      await plain.close();
    }
  });

  it.skipIf(!hasKubectl)(`shows its slices to \`kubectl get endpointslices -A\`${hasKubectl ? '' : ' (skipped: kubectl is not installed)'}`, async () => {
    const ns = namespace();
    createPod(ns, 'web-1', { ips: ['10.244.9.11'] });
    createService(ns, 'web', { selector: { app: 'web' }, ports: [{ port: 80 }] });
    await slicesWhen(ns, 'web', 'one endpoint', (slices) => slices[0]?.endpoints.length === 1);
    const kubeconfig = await server.writeKubeconfig(join(workDir, 'kubeconfig'));
    const output = await new Promise<string>((resolve, reject) => {
      execFile('kubectl', ['--kubeconfig', kubeconfig, '--cache-dir', join(workDir, 'cache'), 'get', 'endpointslices', '-A'], { timeout: 20_000 }, (error, stdout, stderr) =>
        error ? reject(new Error(`kubectl failed: ${stderr}`)) : resolve(stdout),
      );
    });
    expect(output).toMatch(/^NAMESPACE\s+NAME\s+ADDRESSTYPE\s+PORTS\s+ENDPOINTS\s+AGE$/m);
    expect(output).toMatch(new RegExp(`^default\\s+kubernetes\\s+IPv4\\s+${server.port}\\s+127\\.0\\.0\\.1\\s`, 'm'));
    expect(output).toMatch(new RegExp(`^${ns}\\s+web-[a-z0-9]{5}\\s+IPv4\\s+80\\s+10\\.244\\.9\\.11\\s`, 'm'));
  });
});

function createPodIn(target: ApiServer): void {
  target.create({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web-1', labels: { app: 'web' } },
    spec: { nodeName: 'node-a', containers: [{ name: 'app', image: 'app:1' }] },
    status: { phase: 'Running', podIPs: [{ ip: '10.244.0.9' }], conditions: [{ type: 'Ready', status: 'True' }] },
  } as KubeObject);
}
