import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { parseIpvsConnectionTable } from '@kube-router/netfilter';
import { describe, expect, it } from 'vitest';
import { explainServicePath } from './explain.js';
import { buildProxyModel } from './model.js';

const service: V1Service = {
  metadata: { namespace: 'shop', name: 'web' },
  spec: { clusterIP: '10.96.0.10', sessionAffinity: 'ClientIP', ports: [{ name: 'http', protocol: 'TCP', port: 80 }] },
};
const slice: V1EndpointSlice = {
  addressType: 'IPv4',
  metadata: { namespace: 'shop', name: 'web-1', labels: { 'kubernetes.io/service-name': 'web' } },
  ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
  endpoints: ['10.244.0.3', '10.244.0.4'].map((ip) => ({ addresses: [ip], conditions: { ready: true }, nodeName: 'n1' })),
};
const desired = buildProxyModel(
  { services: [service], slicesFor: () => [slice], node: { metadata: { name: 'n1' } }, nodeName: 'n1', localAddresses: [] },
  { families: ['ipv4'], nodePortBindOnAllIp: false, serviceProxyName: 'kube-router' },
).virtualServers;
const table = parseIpvsConnectionTable(
  [
    'IPVS connection entries',
    'pro expire state       source             virtual            destination',
    'TCP 01:58  TIME_WAIT   10.244.0.5:51234   10.96.0.10:80      10.244.0.4:8080',
    'TCP 14:59  ESTABLISHED 10.244.0.6:40000   10.96.0.10:80      10.244.0.3:8080',
    'TCP 01:00  ESTABLISHED 10.244.0.5:40001   10.96.0.11:80      10.244.0.9:8080',
  ].join('\n'),
);

describe('explainServicePath', () => {
  it('names the Service, its real servers and, of the connection table, only the client’s connections to that address', () => {
    expect(explainServicePath(desired, table, { source: '10.244.0.5', destination: '10.96.0.10', port: 80, protocol: 'TCP' })).toEqual({
      service: 'shop/web',
      portName: 'http',
      kind: 'cluster-ip',
      via: 'IPVS TCP 10.96.0.10:80 rr persistent 10800 s',
      endpoints: [
        { address: '10.244.0.3', port: 8080, weight: 1 },
        { address: '10.244.0.4', port: 8080, weight: 1 },
      ],
      connections: [{ client: { address: '10.244.0.5', port: 51234 }, endpoint: { address: '10.244.0.4', port: 8080 }, state: 'TIME_WAIT' }],
    });
  });

  it('lists every client’s connections without a source, and knows nothing of other addresses, ports or protocols', () => {
    expect(explainServicePath(desired, table, { destination: '10.96.0.10', port: 80, protocol: 'TCP' })?.connections).toHaveLength(2);
    expect(explainServicePath(desired, table, { destination: '10.96.0.10', port: 81, protocol: 'TCP' })).toBeUndefined();
    expect(explainServicePath(desired, table, { destination: '10.96.0.10', port: 80, protocol: 'UDP' })).toBeUndefined();
    expect(explainServicePath(desired, table, { destination: '10.96.0.99', port: 80, protocol: 'TCP' })).toBeUndefined();
  });

  it('refuses an address that is not one, by name', () => {
    expect(() => explainServicePath(desired, table, { destination: '10.96.0.300', port: 80, protocol: 'TCP' })).toThrow(/"10.96.0.300" is not an IP address/);
  });
});
