// Property tests: arbitrary JSON objects and watch events never break an informer, and what it hands plugins has
// the shape their types promise.
import type { KubernetesObject, V1NetworkPolicy, V1Pod, V1Service } from '@kubernetes/client-node';
import { ApiError } from '@kube-router/testkit';
import type { KubeObject } from '@kube-router/testkit';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InformerFactory } from './informer-factory.js';
import { ObjectReader, SKIP_REASONS } from './object-reader.js';
import { RESOURCES } from './resources.js';
import { captureLogs, startTestCluster, waitFor } from './testing/fixtures.js';
import type { TestCluster } from './testing/fixtures.js';

/** Mostly a well-typed value, sometimes any JSON at all in its place. */
const maybe = <T>(arbitrary: fc.Arbitrary<T>): fc.Arbitrary<unknown> =>
  fc.oneof({ weight: 15, arbitrary }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) });
const partial = <T extends Record<string, fc.Arbitrary<unknown>>>(fields: T) => fc.record(fields, { requiredKeys: [] });

const dnsName = fc.stringMatching(/^[a-z][a-z0-9-]{0,8}[a-z0-9]$/);
const labels = maybe(fc.dictionary(fc.stringMatching(/^[a-z]{1,5}$/), maybe(fc.string({ maxLength: 5 })), { maxKeys: 3 }));
const metadata = (namespace: fc.Arbitrary<unknown>) => maybe(partial({ name: maybe(dnsName), namespace, labels, uid: maybe(fc.uuid()) }));
const port = maybe(fc.integer({ min: 1, max: 65_535 }));
const protocol = maybe(fc.constantFrom('TCP', 'UDP', 'SCTP'));

const podSpec = maybe(
  partial({
    nodeName: maybe(dnsName),
    hostNetwork: maybe(fc.boolean()),
    containers: maybe(
      fc.array(maybe(fc.record({ name: maybe(dnsName), ports: maybe(fc.array(maybe(partial({ containerPort: port, protocol, name: maybe(dnsName) })), { maxLength: 2 })) })), {
        maxLength: 2,
      }),
    ),
  }),
);
const podStatus = maybe(partial({ phase: maybe(fc.constantFrom('Running', 'Pending')), podIP: maybe(fc.ipV4()), podIPs: maybe(fc.array(maybe(fc.record({ ip: maybe(fc.ipV4()) })), { maxLength: 2 })) }));
const podObject = (namespace: fc.Arbitrary<unknown>) =>
  fc.record({ apiVersion: fc.constant('v1'), kind: fc.constant('Pod'), metadata: metadata(namespace), spec: podSpec, status: podStatus }, { requiredKeys: ['apiVersion', 'kind', 'metadata'] });

const peer = maybe(partial({ podSelector: maybe(partial({ matchLabels: labels })), ipBlock: maybe(fc.record({ cidr: maybe(fc.constant('10.0.0.0/8')), except: maybe(fc.array(fc.constant('10.1.0.0/16'), { maxLength: 1 })) })) }));
const rule = maybe(partial({ from: maybe(fc.array(peer, { maxLength: 2 })), to: maybe(fc.array(peer, { maxLength: 2 })), ports: maybe(fc.array(maybe(partial({ port: maybe(fc.oneof(port, dnsName)), protocol, endPort: port })), { maxLength: 2 })) }));
const policyObject = fc.record({
  apiVersion: fc.constant('networking.k8s.io/v1'),
  kind: fc.constant('NetworkPolicy'),
  metadata: metadata(fc.constant('default')),
  spec: maybe(partial({ podSelector: maybe(partial({ matchLabels: labels })), ingress: maybe(fc.array(rule, { maxLength: 2 })), egress: maybe(fc.array(rule, { maxLength: 2 })), policyTypes: maybe(fc.array(fc.constantFrom('Ingress', 'Egress'), { maxLength: 2 })) })),
});

const serviceObject = fc.record({
  apiVersion: fc.constant('v1'),
  kind: fc.constant('Service'),
  metadata: metadata(fc.constant('default')),
  spec: maybe(partial({ type: maybe(fc.constantFrom('ClusterIP', 'LoadBalancer')), externalIPs: maybe(fc.array(maybe(fc.ipV4()), { maxLength: 2 })), loadBalancerIP: maybe(fc.ipV4()), ports: maybe(fc.array(maybe(partial({ port, targetPort: maybe(fc.oneof(port, dnsName)), protocol })), { maxLength: 2 })) })),
  status: maybe(partial({ loadBalancer: maybe(partial({ ingress: maybe(fc.array(maybe(partial({ ip: maybe(fc.ipV4()) })), { maxLength: 2 })) })) })),
});

// What plugins do with objects, written against client-node's types without defensive checks: on a readable
// object none of it may throw.
function readLikeAPlugin(object: KubernetesObject): void {
  const meta = object.metadata!;
  meta.name!.toLowerCase();
  for (const [key, value] of Object.entries(meta.labels ?? {})) `${key}=${value.toLowerCase()}`.trim();
  if (object.kind === 'Pod') {
    const pod = object as V1Pod;
    for (const container of pod.spec?.containers ?? []) {
      container.name.toLowerCase();
      for (const containerPort of container.ports ?? []) containerPort.containerPort.toFixed(0);
    }
    for (const ip of pod.status?.podIPs ?? []) ip.ip.toLowerCase();
  } else if (object.kind === 'NetworkPolicy') {
    const policy = object as V1NetworkPolicy;
    const rules = [
      ...(policy.spec?.ingress ?? []).map((r) => ({ peers: r._from ?? [], ports: r.ports ?? [] })),
      ...(policy.spec?.egress ?? []).map((r) => ({ peers: r.to ?? [], ports: r.ports ?? [] })),
    ];
    for (const r of rules) {
      for (const p of r.peers) Object.keys(p.podSelector?.matchLabels ?? {}).concat(p.ipBlock?.cidr.toLowerCase() ?? '');
      for (const p of r.ports) String(p.port ?? '').concat(p.protocol ?? '');
    }
  } else if (object.kind === 'Service') {
    const service = object as V1Service;
    for (const ip of service.spec?.externalIPs ?? []) ip.toLowerCase();
    service.spec?.loadBalancerIP?.toLowerCase();
    for (const p of service.spec?.ports ?? []) p.port.toFixed(0);
    for (const ingress of service.status?.loadBalancer?.ingress ?? []) ingress.ip?.toLowerCase();
  }
}

describe('the object reader, on arbitrary JSON', () => {
  const readers = {
    pods: new ObjectReader(RESOURCES.pods),
    networkpolicies: new ObjectReader(RESOURCES.networkpolicies),
    services: new ObjectReader(RESOURCES.services),
  };
  beforeAll(() => Promise.all(Object.values(readers).map((reader) => reader.load())));

  it.each([
    ['pods', podObject(maybe(dnsName))],
    ['networkpolicies', policyObject],
    ['services', serviceObject],
  ] as const)('never throws on %s, and what it accepts reads like its type', (resource, arbitrary) => {
    let accepted = 0;
    fc.assert(
      fc.property(fc.oneof({ weight: 4, arbitrary }, { weight: 1, arbitrary: fc.jsonValue() }), (raw) => {
        const reading = readers[resource].read(structuredClone(raw));
        if (!reading.ok) {
          // A refusal always says why: one of the metric's reasons and a readable explanation for the log and event.
          expect(SKIP_REASONS).toContain(reading.reason);
          expect(reading.problem).toMatch(/\S/);
          return;
        }
        accepted++;
        readLikeAPlugin(reading.object);
      }),
      { numRuns: 1000 },
    );
    // The generators are worth something only if they also make readable objects.
    expect(accepted).toBeGreaterThan(100);
  });
});

describe('informers fed arbitrary objects and watch events over HTTP', () => {
  let cluster: TestCluster;
  let factory: InformerFactory;
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => {
    unhandled.push(reason);
  };

  beforeAll(async () => {
    process.on('unhandledRejection', onUnhandled);
    cluster = await startTestCluster({ validation: false });
    factory = new InformerFactory({ kubeConfig: cluster.kubeConfig, logger: captureLogs().logger, restartBackoff: { initialMs: 50, maxMs: 200 } });
    factory.pods();
    await factory.start({ cacheSyncTimeoutMs: 5000 });
  });

  afterAll(async () => {
    await factory.stop();
    await cluster.close();
    process.off('unhandledRejection', onUnhandled);
  });

  it('keep syncing, keep delivering valid objects, and agree with a fresh list', async () => {
    const { server } = cluster;
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(podObject(fc.constant('placeholder')), { minLength: 1, maxLength: 6 }),
        fc.array(fc.record({ index: fc.nat(), replacement: podObject(fc.constant('placeholder')) }), { maxLength: 3 }),
        fc.array(fc.jsonValue({ maxDepth: 3 }), { maxLength: 4 }),
        async (objects, updates, rawEvents) => {
          const namespace = `prop-${run++}`;
          server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
          const inNamespace = (raw: Record<string, unknown>, name: string): KubeObject => {
            const meta = typeof raw.metadata === 'object' && raw.metadata !== null && !Array.isArray(raw.metadata) ? raw.metadata : {};
            // The server needs a name and refuses another namespace than the URL's; the rest stays arbitrary.
            return { ...raw, metadata: { ...meta, name, namespace } } as KubeObject;
          };
          const created: string[] = [];
          for (const [index, raw] of objects.entries()) {
            try {
              server.create(inNamespace(raw, `pod-${index}`), { validate: false });
              created.push(`pod-${index}`);
            } catch (error) {
              if (!(error instanceof ApiError)) throw error;
            }
          }
          for (const event of rawEvents) server.faults.sendWatchEvent('pods', { type: 'MODIFIED', object: event });
          for (const { index, replacement } of updates) {
            const name = created[index % Math.max(1, created.length)];
            if (name === undefined) continue;
            try {
              server.update(inNamespace(replacement, name), { validate: false });
            } catch (error) {
              if (!(error instanceof ApiError)) throw error;
            }
          }
          server.create({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'canary', namespace }, spec: { containers: [{ name: 'main' }] } });

          const pods = factory.pods();
          await waitFor(`the canary of ${namespace}`, () => pods.get(namespace, 'canary') !== undefined);
          expect(factory.hasSynced()).toBe(true);
          expect(factory.status()[0]).toMatchObject({ watchHealthy: true, restarts: 0 });
          const watched = pods.listInNamespace(namespace);
          for (const pod of watched) readLikeAPlugin(pod);

          // What the watch delivered is what a list gives: no stale version of an object that turned unreadable.
          const fresh = new InformerFactory({ kubeConfig: cluster.kubeConfig, logger: captureLogs().logger });
          const freshPods = fresh.pods();
          try {
            await fresh.start({ cacheSyncTimeoutMs: 5000 });
            const byName = (list: readonly V1Pod[]) =>
              [...list].sort((a, b) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? '')).map((pod) => [pod.metadata?.name, pod.spec]);
            expect(JSON.stringify(byName(watched))).toBe(JSON.stringify(byName(freshPods.listInNamespace(namespace))));
          } finally {
            await fresh.stop();
          }
        },
      ),
      { numRuns: 25 },
    );
    expect(factory.status()[0]?.lists).toBe(1);
    expect(unhandled).toEqual([]);
  }, 60_000);
});
