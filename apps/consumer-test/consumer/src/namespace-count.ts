// A platform team's own plugin, built only from the published packages: it lists the cluster's Namespaces on every
// sync (a real API dependency, so the contract suite can break it) and exports their number as its own metric.
import { CoreV1Api } from '@kubernetes/client-node';
import { createSyncController, definePlugin } from '@kube-router/controller';
import { callApi, KubeServices } from '@kube-router/kube';
import { Gauge } from 'prom-client';
import { z } from 'zod';

export const NAMESPACE_COUNT = 'namespace-count';

export const namespaceCountOptions = z.strictObject({
  syncPeriodMs: z.number().int().positive().default(30_000),
  syncTimeoutMs: z.number().int().positive().default(5_000),
});

export const namespaceCountPlugin = definePlugin({
  name: NAMESPACE_COUNT,
  host: '^1.0.0',
  options: namespaceCountOptions,
  create(ctx, options) {
    const api = ctx.services.get(KubeServices).kubeConfig.makeApiClient(CoreV1Api);
    const namespaces = new Gauge({
      name: 'consumer_namespaces',
      help: 'Namespaces the last sync listed',
      registers: [ctx.metrics.registry],
    });
    return createSyncController(ctx, {
      name: NAMESPACE_COUNT,
      syncPeriodMs: options.syncPeriodMs,
      syncTimeoutMs: options.syncTimeoutMs,
      async sync({ signal }) {
        // The sync's timeout ends a slow request through `signal`; the request's own deadline is longer, so that the
        // two never race and a hung API server shows as the sync's timeout.
        const list = await callApi('list namespaces', options.syncTimeoutMs * 2, (o) => api.listNamespace({}, o), signal);
        namespaces.set(list.items.length);
      },
    });
  },
});
