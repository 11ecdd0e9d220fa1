import type { V1Endpoint, V1EndpointSlice } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { categorizeEndpoints, servicePortEndpoints, usesClusterEndpoints, usesLocalEndpoints } from './service-endpoints.js';
import type { EndpointPolicy, ServiceEndpoint } from './service-endpoints.js';

const NODE = { name: 'node-a', zone: 'zone-a' };
const CLUSTER: EndpointPolicy = { internalLocal: false, externalLocal: false, externallyAccessible: false };

function slice(endpoints: V1Endpoint[], ports = [{ name: 'http', port: 8080, protocol: 'TCP' }], addressType = 'IPv4', name = 's1'): V1EndpointSlice {
  return { metadata: { name }, addressType, ports, endpoints };
}

function ep(address: string, extra: Partial<ServiceEndpoint> = {}): ServiceEndpoint {
  return { address, family: 'ipv4', port: 8080, nodeName: 'node-b', zone: undefined, local: false, ready: true, serving: true, terminating: false, zoneHints: [], nodeHints: [], ...extra };
}

const addresses = (list: readonly ServiceEndpoint[]) => list.map((endpoint) => endpoint.address);

describe('servicePortEndpoints', () => {
  it('reads the port matching by name and protocol, every condition, hints, and marks local ones', () => {
    const { endpoints, problems } = servicePortEndpoints(
      [
        slice([
          { addresses: ['10.1.0.1', '10.1.0.9'], nodeName: 'node-a', conditions: { ready: true }, hints: { forZones: [{ name: 'zone-a' }], forNodes: [{ name: 'node-a' }] } },
          { addresses: ['10.1.0.2'], nodeName: 'node-b', conditions: { ready: false, serving: true, terminating: true } },
          { addresses: ['10.1.0.3'] },
        ]),
        slice([{ addresses: ['10.1.0.4'] }], [{ name: 'http', port: 9999, protocol: 'UDP' }], 'IPv4', 's2'),
        slice([{ addresses: ['svc.example'] }], [{ name: 'http', port: 80, protocol: 'TCP' }], 'FQDN', 's3'),
      ],
      { name: 'http', protocol: 'TCP' },
      'node-a',
    );
    expect(problems).toEqual([]);
    expect(endpoints).toEqual([
      { address: '10.1.0.1', family: 'ipv4', port: 8080, nodeName: 'node-a', zone: undefined, local: true, ready: true, serving: true, terminating: false, zoneHints: ['zone-a'], nodeHints: ['node-a'] },
      { address: '10.1.0.2', family: 'ipv4', port: 8080, nodeName: 'node-b', zone: undefined, local: false, ready: false, serving: true, terminating: true, zoneHints: [], nodeHints: [] },
      { address: '10.1.0.3', family: 'ipv4', port: 8080, nodeName: undefined, zone: undefined, local: false, ready: true, serving: true, terminating: false, zoneHints: [], nodeHints: [] },
    ]);
  });

  it('reports a bad address or port as a problem and keeps the rest; deduplicates across slices, local copy first', () => {
    const { endpoints, problems } = servicePortEndpoints(
      [
        slice([{ addresses: ['010.0.0.1'] }, { addresses: ['10.1.0.1'], nodeName: 'node-b' }]),
        slice([{ addresses: ['10.1.0.1'], nodeName: 'node-a' }], undefined, 'IPv4', 's2'),
        slice([{ addresses: ['10.1.0.7'] }], [{ name: 'http', port: 70_000, protocol: 'TCP' }], 'IPv4', 's3'),
      ],
      { name: 'http', protocol: 'TCP' },
      'node-a',
    );
    expect(addresses(endpoints)).toEqual(['10.1.0.1']);
    expect(endpoints[0]?.local).toBe(true);
    expect(problems.map((problem) => problem.slice)).toEqual(['s1', 's3']);
    expect(problems[0]?.message).toContain('"010.0.0.1" is not an IP address');
  });
});

describe('categorizeEndpoints', () => {
  it('uses ready endpoints, and serving terminating ones only when none is ready (KEP-1669)', () => {
    const ready = ep('10.0.0.1');
    const terminating = ep('10.0.0.2', { ready: false, terminating: true });
    const notServing = ep('10.0.0.3', { ready: false, serving: false, terminating: true });
    expect(addresses(categorizeEndpoints([ready, terminating, notServing], CLUSTER, NODE).cluster)).toEqual(['10.0.0.1']);
    const fallback = categorizeEndpoints([terminating, notServing], CLUSTER, NODE);
    expect(addresses(fallback.cluster)).toEqual(['10.0.0.2']);
    expect(fallback.hasAnyEndpoints).toBe(true);
    const none = categorizeEndpoints([notServing, ep('10.0.0.4', { ready: false, serving: false })], CLUSTER, NODE);
    expect(none).toMatchObject({ cluster: [], hasAnyEndpoints: false });
  });

  it('decides the Local policy separately: local ready, else local serving terminating, even when remote ones are ready', () => {
    const policy = { internalLocal: true, externalLocal: false, externallyAccessible: false };
    const remote = ep('10.0.0.1');
    const localTerminating = ep('10.0.0.2', { local: true, ready: false, terminating: true });
    const result = categorizeEndpoints([remote, localTerminating], policy, NODE);
    expect(result.cluster).toEqual([]);
    expect(addresses(result.local)).toEqual(['10.0.0.2']);
    expect(addresses(result.allReachable)).toEqual(['10.0.0.2']);
    const noLocal = categorizeEndpoints([remote], policy, NODE);
    expect(noLocal.local).toEqual([]);
    // Endpoints exist elsewhere: traffic is dropped here, not rejected as for a Service without endpoints.
    expect(noLocal.hasAnyEndpoints).toBe(true);
  });

  it('keeps cluster and local apart for externalTrafficPolicy Local, and their union reachable', () => {
    const policy = { internalLocal: false, externalLocal: true, externallyAccessible: true };
    const result = categorizeEndpoints([ep('10.0.0.1'), ep('10.0.0.2', { local: true })], policy, NODE);
    expect(addresses(result.cluster)).toEqual(['10.0.0.1', '10.0.0.2']);
    expect(addresses(result.local)).toEqual(['10.0.0.2']);
    expect(addresses(result.allReachable)).toEqual(['10.0.0.1', '10.0.0.2']);
    // externalTrafficPolicy Local without any external address is no Local traffic at all.
    expect(categorizeEndpoints([ep('10.0.0.2', { local: true })], { ...policy, externallyAccessible: false }, NODE).local).toEqual([]);
  });

  it('needs the Cluster endpoints for an externally accessible port even when both policies are Local (short circuit)', () => {
    const policy = { internalLocal: true, externalLocal: true, externallyAccessible: true };
    expect(usesClusterEndpoints(policy)).toBe(true);
    expect(usesLocalEndpoints(policy)).toBe(true);
    const result = categorizeEndpoints([ep('10.0.0.1'), ep('10.0.0.2', { local: true })], policy, NODE);
    expect(addresses(result.cluster)).toEqual(['10.0.0.1', '10.0.0.2']);
    expect(addresses(result.local)).toEqual(['10.0.0.2']);
    expect(usesClusterEndpoints({ ...policy, externallyAccessible: false })).toBe(false);
  });

  it('narrows to this node, or zone, by hints only when every ready endpoint has one and one is ours', () => {
    const sameNode = ep('10.0.0.1', { nodeHints: ['node-a'], zoneHints: ['zone-a'] });
    const otherNode = ep('10.0.0.2', { nodeHints: ['node-b'], zoneHints: ['zone-a'] });
    const otherZone = ep('10.0.0.3', { nodeHints: ['node-c'], zoneHints: ['zone-b'] });
    let result = categorizeEndpoints([sameNode, otherNode, otherZone], CLUSTER, NODE);
    expect(result.topology).toBe('PreferSameNode');
    expect(addresses(result.cluster)).toEqual(['10.0.0.1']);
    result = categorizeEndpoints([otherNode, otherZone], CLUSTER, NODE);
    expect(result.topology).toBe('PreferSameZone');
    expect(addresses(result.cluster)).toEqual(['10.0.0.2']);
    // One ready endpoint without hints: incomplete, ignored.
    result = categorizeEndpoints([otherNode, otherZone, ep('10.0.0.4')], CLUSTER, NODE);
    expect(result.topology).toBeUndefined();
    expect(result.cluster).toHaveLength(3);
    // No hint names our zone: ignored rather than leaving us nothing.
    result = categorizeEndpoints([otherZone], CLUSTER, NODE);
    expect(result.topology).toBeUndefined();
    expect(addresses(result.cluster)).toEqual(['10.0.0.3']);
    // A node without a zone label never matches a zone hint.
    expect(categorizeEndpoints([otherNode], CLUSTER, { name: 'node-a' }).topology).toBeUndefined();
    // Hints of endpoints that are not ready do not count.
    result = categorizeEndpoints([sameNode, ep('10.0.0.5', { ready: false })], CLUSTER, NODE);
    expect(result.topology).toBe('PreferSameNode');
  });
});
