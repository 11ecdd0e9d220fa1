// Issue 35: values kube-apiserver refuses (ports out of range, addresses it cannot parse, oversized annotations)
// were stored. Each is answered 422 Invalid naming the field, over HTTP as clients see it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiServer } from './server.js';
import { startApiServer } from './server.js';
import { call } from './testing/http-client.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let server: ApiServer;
const api = <T = Json>(method: string, path: string, body?: unknown, contentType?: string) => call<T>(server.url, method, path, body, contentType);

const PODS = '/api/v1/namespaces/default/pods';
const SERVICES = '/api/v1/namespaces/default/services';
const SLICES = '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices';
const NODES = '/api/v1/nodes';

const service = (name: string, spec: Json) => ({ apiVersion: 'v1', kind: 'Service', metadata: { name }, spec });
const pod = (name: string, ports: Json[]) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name },
  spec: { containers: [{ name: 'app', image: 'app:1', ports }] },
});
const slice = (name: string, addressType: string, addresses: string[]) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name, labels: { 'kubernetes.io/service-name': 'web' } },
  addressType,
  endpoints: [{ addresses }],
  ports: [{ port: 80, protocol: 'TCP' }],
});
const node = (name: string, address: string) => ({
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name },
  status: { addresses: [{ type: 'Hostname', address: name }, { type: 'InternalIP', address }] },
});

beforeAll(async () => {
  server = await startApiServer();
});
afterAll(() => server.close());

function expectInvalid(response: { status: number; body: Json }, kind: string, field: string, message: string): void {
  expect(response.status, JSON.stringify(response.body)).toBe(422);
  expect(response.body).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'Invalid', code: 422 });
  expect(response.body.message).toContain(`${kind} "`);
  expect(response.body.message).toContain(`${field}: ${message}`);
  expect(response.body.details.causes).toContainEqual({ reason: expect.any(String), field, message: expect.stringContaining(message) });
}

const range = 'must be between 1 and 65535, inclusive';
const ipRule = 'must be a valid IP address';

describe('port numbers outside 1-65535', () => {
  it.each([
    ['a Service port 0', service('port-0', { ports: [{ port: 0 }] }), 'spec.ports[0].port', `Invalid value: 0: ${range}`],
    ['a Service port 70000', service('port-70000', { ports: [{ port: 70000 }] }), 'spec.ports[0].port', `Invalid value: 70000: ${range}`],
    ['a targetPort 70000', service('target-70000', { ports: [{ port: 80, targetPort: 70000 }] }), 'spec.ports[0].targetPort', `Invalid value: 70000: ${range}`],
    ['a nodePort 70000', service('node-70000', { type: 'NodePort', ports: [{ port: 80, nodePort: 70000 }] }), 'spec.ports[0].nodePort', `Invalid value: 70000: ${range}`],
    [
      'a nodePort outside the node port range',
      service('node-40000', { type: 'NodePort', ports: [{ port: 80, nodePort: 40000 }] }),
      'spec.ports[0].nodePort',
      'Invalid value: 40000: provided port is not in the valid range. The range of valid ports is 30000-32767',
    ],
  ])('refuses %s', async (_what, body, field, message) => {
    expectInvalid(await api('POST', SERVICES, body), 'Service', field, message);
    expect(server.get('v1', 'Service', 'default', body.metadata.name)).toBeUndefined();
  });

  it.each([
    ['containerPort 0', [{ containerPort: 0 }], 'containerPort', 0],
    ['containerPort 70000', [{ containerPort: 70000 }], 'containerPort', 70000],
    ['hostPort 70000', [{ containerPort: 80, hostPort: 70000 }], 'hostPort', 70000],
  ])('refuses a Pod with %s', async (what, ports, field, value) => {
    const body = pod(`pod-${what.replace(' ', '-').toLowerCase()}`, ports);
    expectInvalid(await api('POST', PODS, body), 'Pod', `spec.containers[0].ports[0].${field}`, `Invalid value: ${value}: ${range}`);
  });

  it('stores the ports at the ends of the range, and a targetPort of 0 as the port', async () => {
    const created = await api('POST', SERVICES, service('ports-ok', { type: 'NodePort', ports: [{ port: 65535, targetPort: 0, nodePort: 32767 }, { name: 'b', port: 1, targetPort: 'http' }] }));
    expect(created.status).toBe(201);
    expect(created.body.spec.ports.map((p: Json) => [p.port, p.targetPort, p.nodePort])).toEqual([[65535, 65535, 32767], [1, 'http', 30000]]);
    expect((await api('POST', PODS, pod('ports-ok', [{ containerPort: 65535, hostPort: 0 }, { containerPort: 1, hostPort: 1 }]))).status).toBe(201);
  });

  it('refuses an update that takes a port out of range', async () => {
    expect((await api('POST', SERVICES, service('patched-port', { ports: [{ port: 80 }] }))).status).toBe(201);
    const patched = await api('PATCH', `${SERVICES}/patched-port`, [{ op: 'replace', path: '/spec/ports/0/port', value: 0 }], 'application/json-patch+json');
    expectInvalid(patched, 'Service', 'spec.ports[0].port', `Invalid value: 0: ${range}`);
  });
});

describe('addresses kube-apiserver cannot parse', () => {
  it.each([
    ['a clusterIP with a leading zero', { clusterIP: '010.0.0.1', ports: [{ port: 80 }] }, 'spec.clusterIP', '010.0.0.1'],
    ['a zoned clusterIPs entry', { clusterIPs: ['fe80::1%eth0'], ports: [{ port: 80 }] }, 'spec.clusterIPs[0]', 'fe80::1%eth0'],
    ['an externalIP with a leading zero', { externalIPs: ['192.0.2.1', '010.0.0.1'], ports: [{ port: 80 }] }, 'spec.externalIPs[1]', '010.0.0.1'],
    ['a zoned loadBalancerIP', { type: 'LoadBalancer', loadBalancerIP: 'fe80::1%eth0', ports: [{ port: 80 }] }, 'spec.loadBalancerIP', 'fe80::1%eth0'],
  ])('refuses a Service with %s', async (_what, spec, field, value) => {
    const name = field.replace(/[^a-z]/gi, '').toLowerCase();
    expectInvalid(await api('POST', SERVICES, service(name, spec)), 'Service', field, `Invalid value: "${value}": ${ipRule}`);
  });

  it('refuses Pod IPs in a status write', async () => {
    expect((await api('POST', PODS, pod('pod-ips', []))).status).toBe(201);
    const path = `${PODS}/pod-ips/status`;
    const merge = 'application/merge-patch+json';
    expectInvalid(await api('PATCH', path, { status: { podIP: '010.0.0.1' } }, merge), 'Pod', 'status.podIP', `Invalid value: "010.0.0.1": ${ipRule}`);
    expectInvalid(await api('PATCH', path, { status: { podIPs: [{ ip: '10.0.0.1' }, { ip: 'fe80::1%eth0' }] } }, merge), 'Pod', 'status.podIPs[1].ip', `Invalid value: "fe80::1%eth0": ${ipRule}`);
    const good = await api('PATCH', path, { status: { podIP: '10.0.0.1', podIPs: [{ ip: '10.0.0.1' }, { ip: 'fd00::1' }] } }, merge);
    expect(good.status).toBe(200);
  });

  it.each([
    ['an IPv4 address with a leading zero', 'IPv4', ['10.0.0.1', '010.0.0.2'], 'endpoints[0].addresses[1]', 'Invalid value: "010.0.0.2": must be a valid IPv4 address'],
    ['a zoned IPv6 address', 'IPv6', ['fe80::1%eth0'], 'endpoints[0].addresses[0]', 'Invalid value: "fe80::1%eth0": must be a valid IPv6 address'],
    ['an IPv6 address in an IPv4 slice', 'IPv4', ['fd00::1'], 'endpoints[0].addresses[0]', 'Invalid value: "fd00::1": must be a valid IPv4 address'],
  ])('refuses an EndpointSlice with %s', async (_what, addressType, addresses, field, message) => {
    const name = `slice-${addressType.toLowerCase()}-${addresses.length}-${addresses[0]?.length}`;
    expectInvalid(await api('POST', SLICES, slice(name, addressType, addresses)), 'EndpointSlice', field, message);
  });

  it('parses no Node address, as kube-apiserver does, and refuses one listed twice', async () => {
    // The kubelet reports what it finds; routing-bgp's tests rely on storing an InternalIP that does not parse.
    expect((await api('POST', NODES, node('node-unparsed', '10.0.0.two'))).status).toBe(201);
    expect((await api('POST', NODES, node('node-good', '192.0.2.10'))).status).toBe(201);
    const twice = { ...node('node-twice', '192.0.2.11'), status: { addresses: [{ type: 'InternalIP', address: '192.0.2.11' }, { type: 'InternalIP', address: '192.0.2.11' }] } };
    expectInvalid(await api('POST', NODES, twice), 'Node', 'status.addresses[1]', 'Duplicate value: core.NodeAddress{Type:"InternalIP", Address:"192.0.2.11"}');
    expect((await api('POST', SLICES, slice('slice-good', 'IPv6', ['fd00::1', '2001:db8::2']))).status).toBe(201);
  });
});

describe('metadata.annotations over 256 KiB', () => {
  const limit = 256 * 1024;
  const withAnnotations = (name: string, valueBytes: number) => ({
    ...service(name, { ports: [{ port: 80 }] }),
    metadata: { name, annotations: { 'example.com/a': 'x'.repeat(valueBytes - 'example.com/a'.length) } },
  });

  it('stores annotations of exactly 262144 bytes and refuses one byte more', async () => {
    expect((await api('POST', SERVICES, withAnnotations('annotations-at-limit', limit))).status).toBe(201);
    const response = await api('POST', SERVICES, withAnnotations('annotations-over', limit + 1));
    expectInvalid(response, 'Service', 'metadata.annotations', 'Too long: must have at most 262144 bytes');
    expect(response.body.details.causes[0].reason).toBe('FieldValueTooLong');
  });

  it('counts keys and values together, and in UTF-8 bytes, on a patch too', async () => {
    expect((await api('POST', SERVICES, withAnnotations('annotations-patched', 1000))).status).toBe(201);
    // 'é' is two bytes in UTF-8: 131072 characters fill the limit by themselves.
    const patch = { metadata: { annotations: { 'example.com/b': 'é'.repeat(limit / 2) } } };
    const patched = await api('PATCH', `${SERVICES}/annotations-patched`, patch, 'application/merge-patch+json');
    expectInvalid(patched, 'Service', 'metadata.annotations', 'Too long: must have at most 262144 bytes');
  });
});
