import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { ObjectReader } from './object-reader.js';
import { RESOURCES } from './resources.js';

describe('ObjectReader', () => {
  it('drops managedFields, which no plugin reads, and keeps the rest of the metadata', async () => {
    const reader = new ObjectReader<V1Pod>(RESOURCES.pods);
    await reader.load();
    const reading = reader.read({
      metadata: {
        name: 'web-1',
        namespace: 'default',
        labels: { app: 'web' },
        managedFields: [{ manager: 'kubelet', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:status': {} } }],
      },
      spec: { containers: [{ name: 'main', image: 'pause' }] },
    });
    expect(reading.ok).toBe(true);
    const pod = reading.ok ? reading.object : undefined;
    expect(pod?.metadata?.managedFields).toBeUndefined();
    expect(pod?.metadata).toMatchObject({ name: 'web-1', namespace: 'default', labels: { app: 'web' } });
  });
});
