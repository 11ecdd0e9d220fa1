import { describe, expect, it } from 'vitest';
import { ApiError } from '../errors.js';
import type { KubeObject } from '../kube-object.js';
import { ResourceRegistry } from '../resources.js';
import { matchesFieldSelector, parseFieldSelector } from './field-selector.js';

const registry = new ResourceRegistry();
const pods = registry.byPlural('', 'v1', 'pods')!;
const services = registry.byPlural('', 'v1', 'services')!;

const pod: KubeObject = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'a', namespace: 'ns1' },
  spec: { nodeName: 'node-1' },
  status: { phase: 'Running' },
};

describe('field selectors', () => {
  it('matches name, namespace and resource-specific fields', () => {
    const matches = (selector: string) => matchesFieldSelector(pod, parseFieldSelector(selector, pods));
    expect(matches('metadata.name=a')).toBe(true);
    expect(matches('metadata.name==a,metadata.namespace=ns1')).toBe(true);
    expect(matches('metadata.namespace!=ns1')).toBe(false);
    expect(matches('spec.nodeName=node-1')).toBe(true);
    expect(matches('spec.nodeName=node-2')).toBe(false);
    expect(matches('spec.nodeName!=node-2,status.phase=Running')).toBe(true);
    expect(matches('spec.nodeName=')).toBe(false);
    expect(matches('spec.hostNetwork=false')).toBe(true);
  });

  it('unescapes values', () => {
    const odd: KubeObject = { ...pod, spec: { nodeName: 'a,b=c' } };
    expect(matchesFieldSelector(odd, parseFieldSelector('spec.nodeName=a\\,b\\=c', pods))).toBe(true);
  });

  it('refuses fields the resource does not index, like a real API server', () => {
    expect(() => parseFieldSelector('spec.nodeName=x', services)).toThrow(/field label not supported: spec.nodeName/);
    expect(() => parseFieldSelector('nonsense', pods)).toThrow(ApiError);
  });
});
