import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import type { Registry } from 'prom-client';

export interface MetricsRoutesOptions {
  registry: Registry;
  /** kube-router's --metrics-path. Default /metrics. */
  path?: string;
}

const metricsRoutesPlugin: FastifyPluginAsync<MetricsRoutesOptions> = async (app, { registry, path }) => {
  app.get(path ?? '/metrics', async (_request, reply) => {
    const body = await registry.metrics();
    return reply.type(registry.contentType).send(body);
  });
};

export const metricsRoutes = fp(metricsRoutesPlugin, { name: '@kube-router/metrics', fastify: '5.x' });
