import pino from 'pino';
import { HealthRegistry } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import type { PluginContext } from '../controller.js';
import { ServiceRegistry } from '../services.js';

/** A plugin context with fresh health and metrics, for the package's own tests. */
export function testContext(options: { defaultGraceMs?: number } = {}): PluginContext {
  return {
    nodeName: 'node-a',
    logger: pino({ level: 'silent' }),
    metrics: new AgentMetrics({ collectDefaultMetrics: false }),
    health: new HealthRegistry({ defaultGraceMs: options.defaultGraceMs ?? 1_000 }),
    services: new ServiceRegistry(),
  };
}
