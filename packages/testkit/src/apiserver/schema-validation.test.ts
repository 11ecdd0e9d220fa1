// Schema validation of writes, over HTTP as clients see it, and its opt-outs.
import { execFile, spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from './errors.js';
import type { ApiServer } from './server.js';
import { startApiServer } from './server.js';
import { call } from './testing/http-client.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let server: ApiServer;
const api = <T = Json>(method: string, path: string, body?: unknown, contentType?: string) => call<T>(server.url, method, path, body, contentType);

const pod = (name: string, spec: Json = { containers: [{ name: 'app', image: 'app:1' }] }) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name },
  spec,
});
const policy = (name: string, spec: Json) => ({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', metadata: { name }, spec });
const service = (name: string, spec: Json) => ({ apiVersion: 'v1', kind: 'Service', metadata: { name }, spec });

const PODS = '/api/v1/namespaces/default/pods';
const POLICIES = '/apis/networking.k8s.io/v1/namespaces/default/networkpolicies';
const SERVICES = '/api/v1/namespaces/default/services';

beforeAll(async () => {
  server = await startApiServer();
});
afterAll(() => server.close());

describe('fields of the wrong JSON type: 400, as kube-apiserver cannot decode them', () => {
  it.each([
    ['a Pod with spec.containers: 5', PODS, pod('bad-containers', { containers: 5 }), 'Pod', 'spec.containers', 'number', 'array'],
    ['a NetworkPolicy with ingress: [{from: 5}]', POLICIES, policy('bad-from', { podSelector: {}, ingress: [{ from: 5 }] }), 'NetworkPolicy', 'spec.ingress[0].from', 'number', 'array'],
    ['a Service with externalIPs: 5', SERVICES, service('bad-external-ips', { ports: [{ port: 80 }], externalIPs: 5 }), 'Service', 'spec.externalIPs', 'number', 'array'],
    ['a Pod whose containerPort is a string', PODS, pod('bad-port', { containers: [{ name: 'a', ports: [{ containerPort: 'http' }] }] }), 'Pod', 'spec.containers[0].ports[0].containerPort', 'string', 'integer'],
    ['a Service whose targetPort is neither int nor string', SERVICES, service('bad-target', { ports: [{ port: 80, targetPort: true }] }), 'Service', 'spec.ports[0].targetPort', 'bool', 'int-or-string'],
  ])('refuses %s', async (_what, path, body, kind, field, actual, expected) => {
    const response = await api('POST', path, body);
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'BadRequest', code: 400 });
    expect(response.body.message).toBe(
      `${kind} in version "v1" cannot be handled as a ${kind}: json: cannot unmarshal ${actual} into Go struct field ${kind}.${field} of type ${expected}`,
    );
    expect(response.body.details.causes).toEqual([{ reason: 'FieldValueTypeInvalid', field, message: expect.stringContaining(field) }]);
    expect(server.get(body.apiVersion, body.kind, 'default', body.metadata.name)).toBeUndefined();
  });

  it('refuses a body that is not JSON with 400', async () => {
    const response = await fetch(`${server.url}${PODS}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"kind": "Pod",' });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ kind: 'Status', reason: 'BadRequest', code: 400 });
  });
});

describe('missing required fields and unsupported values: 422 Invalid with the fields as causes', () => {
  it('names every invalid field in the message and the causes', async () => {
    const response = await api('POST', POLICIES, policy('bad-protocol', { podSelector: {}, ingress: [{ ports: [{ protocol: 'ICMP', port: 80 }] }] }));
    expect(response.status).toBe(422);
    expect(response.body).toMatchObject({
      kind: 'Status',
      reason: 'Invalid',
      code: 422,
      message: 'NetworkPolicy "bad-protocol" is invalid: spec.ingress[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"',
      details: {
        name: 'bad-protocol',
        group: 'networking.k8s.io',
        kind: 'NetworkPolicy',
        causes: [{ reason: 'FieldValueNotSupported', field: 'spec.ingress[0].ports[0].protocol', message: expect.stringContaining('"ICMP"') }],
      },
    });
  });

  it.each([
    ['a Pod without containers', PODS, pod('no-containers', {}), ['spec.containers']],
    ['a container without a name', PODS, pod('no-name', { containers: [{ image: 'x' }] }), ['spec.containers[0].name']],
    ['a Service port without a port number', SERVICES, service('no-port', { ports: [{ name: 'http' }] }), ['spec.ports[0].port']],
    [
      'an EndpointSlice without addressType',
      '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices',
      { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: { name: 'no-type' } },
      ['addressType'],
    ],
    [
      'a core Event without involvedObject',
      '/api/v1/namespaces/default/events',
      { apiVersion: 'v1', kind: 'Event', metadata: { name: 'no-object' }, reason: 'X' },
      ['involvedObject'],
    ],
  ])('refuses %s', async (_what, path, body, fields) => {
    const response = await api('POST', path, body);
    expect(response.status).toBe(422);
    expect(response.body.reason).toBe('Invalid');
    expect(response.body.details.causes).toEqual(fields.map((field) => ({ reason: 'FieldValueRequired', field, message: 'Required value' })));
    expect(response.body.message).toContain(`${fields[0]}: Required value`);
  });
});

describe('every write is checked', () => {
  it('checks updates, patches, status writes and dry runs, and leaves the object as it was', async () => {
    const created = await api('POST', SERVICES, service('writes', { ports: [{ port: 80 }] }));
    expect(created.status).toBe(201);
    const path = `${SERVICES}/writes`;

    const put = await api('PUT', path, { ...created.body, spec: { ...created.body.spec, externalIPs: 5 } });
    expect(put.status).toBe(400);
    const merge = await api('PATCH', path, { spec: { type: 'Sideways' } }, 'application/merge-patch+json');
    expect(merge.status).toBe(422);
    expect(merge.body.details.causes[0]).toMatchObject({ field: 'spec.type', reason: 'FieldValueNotSupported' });
    const json = await api('PATCH', path, [{ op: 'add', path: '/spec/externalIPs', value: '192.0.2.1' }], 'application/json-patch+json');
    expect(json.status).toBe(400);
    const status = await api('PATCH', `${path}/status`, { status: { loadBalancer: { ingress: [{ ip: 5 }] } } }, 'application/merge-patch+json');
    expect(status.status).toBe(400);
    expect(status.body.message).toContain('status.loadBalancer.ingress[0].ip');
    const dryRun = await api('POST', `${SERVICES}?dryRun=All`, service('dry', { ports: [{ port: 'eighty' }] }));
    expect(dryRun.status).toBe(400);

    const stored = server.get('v1', 'Service', 'default', 'writes')!;
    expect(stored.metadata.resourceVersion).toBe(created.body.metadata.resourceVersion);
    const good = await api('PATCH', `${path}/status`, { status: { loadBalancer: { ingress: [{ ip: '192.0.2.1' }] } } }, 'application/merge-patch+json');
    expect(good.status).toBe(200);
  });

  it('accepts the objects the agent and the lab write, and refuses them broken in the programmatic API too', () => {
    const lease = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'kube-router-lballoc', namespace: 'kube-system' },
      spec: { holderIdentity: 'a', leaseDurationSeconds: 15, acquireTime: '2026-01-01T00:00:00.000000Z', renewTime: '2026-01-01T00:00:00.000000Z', leaseTransitions: 0 },
    };
    expect(server.create(lease).spec).toMatchObject({ holderIdentity: 'a' });
    expect(() => server.update({ ...lease, spec: { ...lease.spec, leaseDurationSeconds: '15' } })).toThrow(
      expect.objectContaining({ code: 400, message: expect.stringContaining('spec.leaseDurationSeconds') }),
    );
    const node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'validated-node' },
      spec: { podCIDR: '10.244.0.0/24', podCIDRs: ['10.244.0.0/24'] },
      status: { addresses: [{ type: 'InternalIP', address: '192.0.2.10' }], conditions: [{ type: 'Ready', status: 'True' }] },
    };
    expect(server.create(node).metadata.uid).toBeDefined();
    expect(() => server.patch('v1', 'Node', undefined, 'validated-node', { spec: { podCIDRs: '10.244.0.0/24' } })).toThrow(ApiError);
    expect(() => server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'bad-finalizers' }, spec: { finalizers: 'kubernetes' } })).toThrow(
      expect.objectContaining({ code: 400, reason: 'BadRequest' }),
    );
    expect(() =>
      server.create({ apiVersion: 'events.k8s.io/v1', kind: 'Event', metadata: { name: 'e', namespace: 'default' }, eventTime: '2026-01-01T00:00:00.000000Z', series: 5 }),
    ).toThrow(ApiError);
  });
});

describe('opting out, for tests that feed the agent bad objects on purpose', () => {
  it('stores anything with validation: false', async () => {
    const lax = await startApiServer({ validation: false });
    try {
      const response = await call<Json>(lax.url, 'POST', PODS, pod('anything', { containers: 5 }));
      expect(response.status).toBe(201);
      expect(lax.get('v1', 'Pod', 'default', 'anything')?.spec).toEqual({ containers: 5 });
      expect(lax.validation.isEnabled('pods')).toBe(false);
    } finally {
      await lax.close();
    }
  });

  it('skips the resources named in except, validates the rest', async () => {
    const partial = await startApiServer({ validation: { except: ['networkpolicies'] } });
    try {
      expect((await call<Json>(partial.url, 'POST', POLICIES, policy('from-5', { podSelector: {}, ingress: [{ from: 5 }] }))).status).toBe(201);
      expect((await call<Json>(partial.url, 'POST', PODS, pod('containers-5', { containers: 5 }))).status).toBe(400);
    } finally {
      await partial.close();
    }
  });

  it('switches per resource at run time, and per write in the programmatic API', async () => {
    server.validation.disable('services');
    try {
      expect((await api('POST', SERVICES, service('lax-svc', { externalIPs: 5 }))).status).toBe(201);
      expect((await api('POST', PODS, pod('strict-pod', { containers: 5 }))).status).toBe(400);
    } finally {
      server.validation.enable('services');
    }
    expect((await api('POST', SERVICES, service('strict-svc', { externalIPs: 5 }))).status).toBe(400);

    const created = server.create(pod('lax-pod', { containers: 5 }), { validate: false });
    expect(created.spec).toEqual({ containers: 5 });
    // Labels and annotations are checked with the schema, and stored as they are without it; a name is always needed.
    const annotated = { ...service('numeric-annotation', {}), metadata: { name: 'numeric-annotation', annotations: { 'kube-router.io/loadbalancer-ips': 7 } } };
    expect(() => server.create(annotated)).toThrow(expect.objectContaining({ code: 422 }));
    expect(server.create(annotated, { validate: false }).metadata.annotations).toEqual({ 'kube-router.io/loadbalancer-ips': 7 });
    expect(() => server.create({ ...pod('x'), metadata: {} }, { validate: false })).toThrow(expect.objectContaining({ code: 422 }));
    expect(() => server.update({ ...created, spec: { containers: 6 } })).toThrow(ApiError);
    expect(server.update({ ...created, spec: { containers: 6 } }, { validate: false }).spec).toEqual({ containers: 6 });
    expect(server.upsert(pod('lax-pod', { containers: 'x' }), { validate: false }).spec).toEqual({ containers: 'x' });
    expect(server.patch('v1', 'Pod', 'default', 'lax-pod', { spec: { containers: 7 } }, 'merge', { validate: false }).spec).toEqual({ containers: 7 });
  });

  it('checks only what a write changes: the agent can still write the status of an object stored without validation', async () => {
    server.create(service('bad-spec', { ports: [{ port: 80 }], externalIPs: 5 }), { validate: false });
    const path = `${SERVICES}/bad-spec/status`;
    const good = await api('PATCH', path, { status: { loadBalancer: { ingress: [{ ip: '192.0.2.7' }] } } }, 'application/merge-patch+json');
    expect(good.status).toBe(200);
    const bad = await api('PATCH', path, { status: { loadBalancer: { ingress: [null] } } }, 'application/merge-patch+json');
    expect(bad.status).toBe(400);
    expect(bad.body.details.causes.map((cause: Json) => cause.field)).toEqual(['status.loadBalancer.ingress[0]']);
    // A spec write is checked in full, so it must fix the spec.
    const relabel = await api('PATCH', `${SERVICES}/bad-spec`, { metadata: { labels: { a: 'b' } } }, 'application/merge-patch+json');
    expect(relabel.status).toBe(400);
    const fix = await api('PATCH', `${SERVICES}/bad-spec`, { spec: { externalIPs: ['192.0.2.8'] } }, 'application/merge-patch+json');
    expect(fix.status).toBe(200);
  });
});

const hasKubectl = spawnSync('kubectl', ['version', '--client'], { timeout: 10_000 }).status === 0;

describe.skipIf(!hasKubectl)('kubectl (skipped: kubectl is not installed)', () => {
  it('shows the server\'s refusal of an invalid manifest, as from a real cluster', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'krt-schema-kubectl-'));
    try {
      const manifest = join(dir, 'policy.yaml');
      await writeFile(
        manifest,
        'apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: { name: kubectl-bad, namespace: default }\nspec: { podSelector: {}, ingress: [{ from: 5 }] }\n',
      );
      const kubeconfig = await server.writeKubeconfig(join(dir, 'kubeconfig'));
      const result = await new Promise<{ code: number; stderr: string }>((resolve) => {
        execFile('kubectl', ['--kubeconfig', kubeconfig, 'apply', '-f', manifest], { timeout: 20_000 }, (error, _stdout, stderr) =>
          resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stderr }),
        );
      });
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain('Error from server (BadRequest)');
      expect(result.stderr).toContain('cannot be handled as a NetworkPolicy');
      expect(result.stderr).toContain('spec.ingress[0].from');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
