import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { HealthRegistry } from '@kube-router/healthcheck';
import { AgentMetrics } from './sync-metrics.js';
import { metricsRoutes } from './routes.js';

async function value(metrics: AgentMetrics, name: string, labels: Record<string, string>) {
  const metric = metrics.registry.getSingleMetric(name);
  const { values } = await metric!.get();
  return values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))?.value;
}

describe('recordSyncResult', () => {
  it('creates both series on a first report that fails: last_success 0, failures 1', async () => {
    const metrics = new AgentMetrics({ collectDefaultMetrics: false });
    metrics.recordSyncResult('netpol', new Error('bad policy'));
    expect(await value(metrics, 'kube_router_controller_sync_last_success', { controller: 'netpol' })).toBe(0);
    expect(await value(metrics, 'kube_router_controller_sync_failures_total', { controller: 'netpol' })).toBe(1);
  });

  it('creates both series on a first report that succeeds: last_success now, failures 0', async () => {
    const metrics = new AgentMetrics({ collectDefaultMetrics: false, now: () => 1_700_000_000_500 });
    metrics.recordSyncResult('proxy');
    expect(await value(metrics, 'kube_router_controller_sync_last_success', { controller: 'proxy' })).toBe(1_700_000_000);
    expect(await value(metrics, 'kube_router_controller_sync_failures_total', { controller: 'proxy' })).toBe(0);
  });

  it('keeps last_success across later failures and counts each failure', async () => {
    let now = 1_000_000;
    const metrics = new AgentMetrics({ collectDefaultMetrics: false, now: () => now });
    metrics.recordSyncResult('routes');
    now += 60_000;
    metrics.recordSyncResult('routes', new Error('a'));
    metrics.recordSyncResult('routes', new Error('b'));
    expect(await value(metrics, 'kube_router_controller_sync_last_success', { controller: 'routes' })).toBe(1_000);
    expect(await value(metrics, 'kube_router_controller_sync_failures_total', { controller: 'routes' })).toBe(2);
  });

  it('keeps agents apart: each owns its registry, none uses the global one', async () => {
    const a = new AgentMetrics({ collectDefaultMetrics: false });
    const b = new AgentMetrics({ collectDefaultMetrics: false });
    a.recordSyncResult('x', new Error('e'));
    expect(await value(b, 'kube_router_controller_sync_failures_total', { controller: 'x' })).toBeUndefined();
  });
});

describe('runObservedSync', () => {
  it('beats at both ends, records the outcome and observes the duration by result', async () => {
    const health = new HealthRegistry();
    const component = health.register('lballoc', { syncPeriodMs: 1_000 });
    const metrics = new AgentMetrics({ collectDefaultMetrics: false });
    const failed = await metrics.runObservedSync(component, () => Promise.reject(new Error('exhausted')));
    expect(failed.ok).toBe(false);
    expect(health.status('lballoc')?.beats).toBe(2);
    const ok = await metrics.runObservedSync(component, () => undefined);
    expect(ok.ok).toBe(true);
    expect(health.status('lballoc')?.beats).toBe(4);
    expect(await value(metrics, 'kube_router_controller_sync_failures_total', { controller: 'lballoc' })).toBe(1);
    const text = await metrics.registry.metrics();
    expect(text).toContain('kube_router_controller_sync_duration_seconds_count{controller="lballoc",result="failure"} 1');
    expect(text).toContain('kube_router_controller_sync_duration_seconds_count{controller="lballoc",result="success"} 1');
  });

  it('records a rejection with no reason as a failure', async () => {
    const health = new HealthRegistry();
    const metrics = new AgentMetrics({ collectDefaultMetrics: false });
    const outcome = await metrics.runObservedSync(health.register('c', { syncPeriodMs: 1 }), () =>
      Promise.reject(undefined),
    );
    expect(outcome.ok).toBe(false);
    expect(await value(metrics, 'kube_router_controller_sync_failures_total', { controller: 'c' })).toBe(1);
  });
});

describe('/metrics over HTTP', () => {
  it('serves the registry in the Prometheus text format, with process metrics, at a configurable path', async () => {
    const metrics = new AgentMetrics();
    metrics.recordSyncResult('netpol', new Error('x'));
    const app = Fastify();
    await app.register(metricsRoutes, { registry: metrics.registry, path: '/custom' });
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const res = await fetch(`${url}/custom`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      const body = await res.text();
      expect(body).toContain('# TYPE kube_router_controller_sync_last_success gauge');
      expect(body).toContain('kube_router_controller_sync_last_success{controller="netpol"} 0');
      expect(body).toContain('kube_router_controller_sync_failures_total{controller="netpol"} 1');
      expect(body).toContain('process_cpu_user_seconds_total');
      expect((await fetch(`${url}/metrics`)).status).toBe(404);
    } finally {
      await app.close();
    }
  });
});
