import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { HealthRegistry } from './registry.js';
import { healthRoutes } from './routes.js';

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function serve(registry: HealthRegistry): Promise<string> {
  app = Fastify();
  await app.register(healthRoutes, { registry });
  return app.listen({ host: '127.0.0.1', port: 0 });
}

function clock() {
  let now = 0;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

describe('health endpoints over HTTP', () => {
  it('answers 200 OK on /healthz and /livez while every component is fresh', async () => {
    const registry = new HealthRegistry();
    registry.register('netpol', { syncPeriodMs: 60_000 }).beat();
    const url = await serve(registry);
    for (const path of ['/healthz', '/livez']) {
      const res = await fetch(url + path);
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('OK\n');
    }
  });

  it('answers 500 naming the stale components only', async () => {
    const t = clock();
    const registry = new HealthRegistry({ now: t.now, defaultGraceMs: 0 });
    registry.register('netpol', { syncPeriodMs: 1_000 });
    const fresh = registry.register('proxy', { syncPeriodMs: 10_000 });
    const url = await serve(registry);
    t.advance(2_000);
    fresh.beat();
    const res = await fetch(`${url}/healthz`);
    expect(res.status).toBe(500);
    expect(await res.text()).toBe(
      '[-]netpol failed: no heartbeat since registration 2.0s ago, window 1.0s\nhealthz check failed\n',
    );
  });

  it('lists every check with ?verbose in the Kubernetes style', async () => {
    const t = clock();
    const registry = new HealthRegistry({ now: t.now, defaultGraceMs: 0 });
    registry.register('netpol', { syncPeriodMs: 1_000 }).beat();
    registry.register('routes', { syncPeriodMs: 1_000 });
    const url = await serve(registry);
    let res = await fetch(`${url}/livez?verbose`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('[+]netpol ok\n[+]routes ok\nlivez check passed\n');
    t.advance(1_500);
    res = await fetch(`${url}/livez?verbose=1`);
    expect(res.status).toBe(500);
    expect(await res.text()).toMatch(/^\[-\]netpol failed: last heartbeat 1\.5s ago, window 1\.0s\n\[-\]routes failed: .*\nlivez check failed\n$/);
  });

  it('answers one check at /livez/<name> and 404 for an unknown one', async () => {
    const t = clock();
    const registry = new HealthRegistry({ now: t.now, defaultGraceMs: 0 });
    registry.register('netpol', { syncPeriodMs: 1_000 }).beat();
    const url = await serve(registry);
    expect((await fetch(`${url}/livez/netpol`)).status).toBe(200);
    t.advance(5_000);
    const res = await fetch(`${url}/livez/netpol`);
    expect(res.status).toBe(500);
    expect(await res.text()).toMatch(/^\[-\]netpol failed: last heartbeat 5\.0s ago/);
    expect((await fetch(`${url}/livez/nope`)).status).toBe(404);
  });

  it('turns /readyz ready after the agent condition holds and every first sync ended', async () => {
    const registry = new HealthRegistry();
    let synced = false;
    registry.addReadinessCheck('informers', () => (synced ? undefined : 'waiting for pods'));
    const component = registry.register('netpol', { syncPeriodMs: 1_000 });
    const url = await serve(registry);
    let res = await fetch(`${url}/readyz`);
    expect(res.status).toBe(500);
    expect(await res.text()).toBe(
      '[-]informers failed: waiting for pods\n[-]netpol failed: first sync has not ended yet\nreadyz check failed\n',
    );
    synced = true;
    component.syncEnded();
    res = await fetch(`${url}/readyz`);
    expect(res.status).toBe(200);
    expect((await fetch(`${url}/readyz/informers`)).status).toBe(200);
  });

  it('keeps readiness out of liveness: an unsynced informer never fails /healthz', async () => {
    const registry = new HealthRegistry();
    registry.addReadinessCheck('informers', () => 'never synced');
    const url = await serve(registry);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect((await fetch(`${url}/readyz`)).status).toBe(500);
  });
});
