import type { V1Service } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { serviceSkipReason } from './service-proxy.js';

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
