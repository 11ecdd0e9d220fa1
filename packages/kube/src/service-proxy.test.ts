import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { cachedServiceOutcome, serviceSkipReason } from './service-proxy.js';
import type { ServiceOutcomeCache } from './service-proxy.js';

const svc = (spec: V1Service['spec'], labels: Record<string, string> = {}): V1Service => ({
  metadata: { namespace: 'default', name: 's', labels },
  spec: { clusterIP: '10.96.0.1', ...spec },
});

describe('serviceSkipReason', () => {
  it('skips headless, ExternalName, no-ClusterIP, headless-labelled and other proxies’ Services', () => {
    expect(serviceSkipReason(svc({ clusterIP: 'None' }), 'kube-router')).toBe('headless');
    expect(serviceSkipReason(svc({ type: 'ExternalName', clusterIP: '' }), 'kube-router')).toBe('ExternalName');
    expect(serviceSkipReason(svc({ clusterIP: '' }), 'kube-router')).toBe('no ClusterIP');
    expect(serviceSkipReason(svc({}, { 'service.kubernetes.io/headless': '' }), 'kube-router')).toMatch(/headless/);
    expect(serviceSkipReason(svc({}, { 'service.kubernetes.io/service-proxy-name': 'other' }), 'kube-router')).toMatch(/other/);
    expect(serviceSkipReason(svc({}, { 'service.kubernetes.io/service-proxy-name': 'kube-router' }), 'kube-router')).toBeUndefined();
    expect(serviceSkipReason(svc({}), 'kube-router')).toBeUndefined();
  });
});

describe('cachedServiceOutcome', () => {
  it('computes again when the Service object, a slice object or the context key differs, and not otherwise', () => {
    const cache: ServiceOutcomeCache<number> = new WeakMap();
    const service: V1Service = { metadata: { namespace: 'ns', name: 'web' } };
    const slice: V1EndpointSlice = { addressType: 'IPv4', endpoints: [] };
    let computed = 0;
    const outcome = (service: V1Service, slices: V1EndpointSlice[], key: string) => cachedServiceOutcome(cache, service, slices, key, () => ++computed);
    expect(outcome(service, [slice], 'a')).toBe(1);
    expect(outcome(service, [slice], 'a')).toBe(1);
    expect(outcome(service, [{ ...slice }], 'a')).toBe(2);
    expect(outcome(service, [], 'a')).toBe(3);
    expect(outcome(service, [], 'b')).toBe(4);
    expect(outcome({ ...service }, [], 'b')).toBe(5);
    expect(cachedServiceOutcome(undefined, service, [], 'b', () => ++computed)).toBe(6);
  });
});
