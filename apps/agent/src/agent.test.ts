import { afterEach, describe, expect, it } from 'vitest';
import { defineServiceKey } from '@kube-router/controller';
import { createAgent, type Agent, type CreateAgentInput } from './agent.js';
import { testPlugin } from './testing/test-plugins.js';
import { freePort, get, captureLogs, sleep, waitFor } from './testing/support.js';
import { pollHealth } from './testing/health-poller.js';

const running: Agent[] = [];

async function startAgent(input: Partial<CreateAgentInput> & Pick<CreateAgentInput, 'plugins'>): Promise<Agent> {
  const agent = await createAgent({
    logger: captureLogs().logger,
    ...input,
    options: {
      nodeName: 'node-a',
      health: { addr: '127.0.0.1', port: 0 },
      metrics: { addr: '127.0.0.1', port: 0 },
      collectDefaultMetrics: false,
      scheduler: { initialBackoffMs: 20, maxBackoffMs: 50 },
      stopTimeoutMs: 2_000,
      ...input.options,
    },
  });
  running.push(agent);
  await agent.start();
  return agent;
}

afterEach(async () => {
  await Promise.all(running.splice(0).map((agent) => agent.stop()));
});

/** The value of one sample in the Prometheus text format, or undefined when the series is absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const lastSuccess = (c: string) => `kube_router_controller_sync_last_success{controller="${c}"}`;
const failures = (c: string) => `kube_router_controller_sync_failures_total{controller="${c}"}`;

describe('a sync that always fails', () => {
  it('keeps /healthz at 200 while the failure counter rises and last_success stays 0', async () => {
    const agent = await startAgent({
      plugins: [
        {
          plugin: testPlugin({
            name: 'x',
            syncPeriodMs: 100,
            minSyncIntervalMs: 10,
            // A 0.5 s window, polled for 2 s: a failure that withheld its beats would show.
            healthGraceMs: 400,
            sync: async () => {
              throw new Error('service default/web rejected');
            },
          }),
        },
      ],
    });
    const probes = pollHealth(`${agent.healthUrl}/healthz`, { durationMs: 2_000 }).results;
    await waitFor('three failed syncs', async () => (sample((await get(agent.metricsUrl!)).body, failures('x')) ?? 0) >= 3);
    const answers = await probes;
    expect(answers.length).toBeGreaterThan(10);
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
    const metrics = (await get(agent.metricsUrl!)).body;
    expect(sample(metrics, failures('x'))).toBeGreaterThanOrEqual(3);
    expect(sample(metrics, lastSuccess('x'))).toBe(0);
  });
});

describe('a wedged sync', () => {
  it('turns /healthz to 500 after its window, naming the component, and /livez/<name> too', async () => {
    let release!: () => void;
    const wedge = new Promise<void>((resolve) => (release = resolve));
    try {
      const agent = await startAgent({
        plugins: [
          { plugin: testPlugin({ name: 'healthy', syncPeriodMs: 100, minSyncIntervalMs: 10, healthGraceMs: 2_000 }) },
          {
            plugin: testPlugin({
              name: 'wedged',
              syncPeriodMs: 200,
              syncTimeoutMs: 0,
              healthGraceMs: 100,
              sync: () => wedge,
            }),
          },
        ],
        options: { nodeName: 'node-a', stopTimeoutMs: 300 },
      });
      expect((await get(`${agent.healthUrl}/healthz`)).status).toBe(200);
      await waitFor('/healthz to fail', async () => (await get(`${agent.healthUrl}/healthz`)).status === 500);
      const healthz = await get(`${agent.healthUrl}/healthz`);
      expect(healthz.body).toMatch(/^\[-\]wedged failed: last heartbeat \d+\.\ds ago, window 0\.3s$/m);
      expect(healthz.body).not.toContain('healthy');
      expect(healthz.body).toContain('healthz check failed');

      const verbose = await get(`${agent.healthUrl}/healthz?verbose`);
      expect(verbose.status).toBe(500);
      expect(verbose.body).toMatch(/^\[\+\]healthy ok\n\[-\]wedged failed: .*\nhealthz check failed\n$/);

      expect(await get(`${agent.healthUrl}/livez/wedged`)).toMatchObject({ status: 500 });
      expect(await get(`${agent.healthUrl}/livez/healthy`)).toEqual({ status: 200, body: 'OK\n' });
      expect(await get(`${agent.healthUrl}/livez/nosuch`)).toMatchObject({ status: 404 });

      // Stopping waits for the running sync; a wedged one is left behind after stopTimeoutMs, and reported.
      const started = performance.now();
      const report = await agent.stop();
      expect(report.notStopped).toEqual(['wedged']);
      expect(performance.now() - started).toBeLessThan(2_000);
    } finally {
      release();
    }
  });
});

describe('a slow sync that reports progress', () => {
  it('stays healthy well past its window', async () => {
    let syncs = 0;
    const agent = await startAgent({
      plugins: [
        {
          plugin: testPlugin({
            name: 'slow',
            syncPeriodMs: 100,
            syncTimeoutMs: 0,
            healthGraceMs: 300,
            sync: async ({ progress }) => {
              syncs++;
              for (let step = 0; step < 25; step++) {
                await sleep(100);
                progress();
              }
            },
          }),
        },
      ],
    });
    // 1.8 s of polling against a 0.4 s window, all inside the first 2.5 s sync.
    const answers = await pollHealth(`${agent.healthUrl}/healthz`, { durationMs: 1_800 }).results;
    expect(syncs).toBe(1);
    expect(answers.length).toBeGreaterThan(20);
    expect(answers.filter((a) => a.status !== 200)).toEqual([]);
    expect(agent.health.status('slow')).toMatchObject({ windowMs: 400, firstSyncEnded: false });
  });

  it('without progress the same sync goes stale: the test above can fail', async () => {
    const agent = await startAgent({
      plugins: [
        {
          plugin: testPlugin({
            name: 'silent',
            syncPeriodMs: 100,
            syncTimeoutMs: 0,
            healthGraceMs: 300,
            sync: () => sleep(2_500),
          }),
        },
      ],
    });
    await waitFor('/healthz to fail', async () => (await get(`${agent.healthUrl}/healthz`)).status === 500, 2_300);
  });
});

describe('sync metrics', () => {
  it('creates both series at the first report, success or failure', async () => {
    let outcome: 'pending' | 'fail' | 'succeed' = 'pending';
    let proceed!: () => void;
    const gate = new Promise<void>((resolve) => (proceed = resolve));
    const agent = await startAgent({
      plugins: [
        {
          plugin: testPlugin({
            name: 'first',
            syncPeriodMs: 60_000,
            sync: async () => {
              await gate;
              if (outcome === 'fail') throw new Error('route 10.0.0.0/24 unreplaceable');
            },
          }),
        },
      ],
    });
    const before = (await get(agent.metricsUrl!)).body;
    expect(sample(before, lastSuccess('first'))).toBeUndefined();
    expect(sample(before, failures('first'))).toBeUndefined();

    outcome = 'fail';
    proceed();
    await waitFor('the first report', async () => sample((await get(agent.metricsUrl!)).body, failures('first')) === 1);
    const after = (await get(agent.metricsUrl!)).body;
    expect(sample(after, lastSuccess('first'))).toBe(0);
    expect(after).toMatch(/kube_router_controller_sync_duration_seconds_count\{controller="first",result="failure"\} 1/);
  });

  it('sets last_success to the time of the successful sync', async () => {
    const agent = await startAgent({ plugins: [{ plugin: testPlugin({ name: 'ok' }) }] });
    await waitFor('a success', async () => (sample((await get(agent.metricsUrl!)).body, lastSuccess('ok')) ?? 0) > 0);
    const metrics = (await get(agent.metricsUrl!)).body;
    expect(Math.abs(sample(metrics, lastSuccess('ok'))! - Date.now() / 1000)).toBeLessThan(5);
    expect(sample(metrics, failures('ok'))).toBe(0);
  });
});

describe('/readyz', () => {
  it('turns 200 only after every first sync ended and the agent conditions hold', async () => {
    let informersSynced = false;
    let finishFirstSync!: () => void;
    const firstSync = new Promise<void>((resolve) => (finishFirstSync = resolve));
    const agent = await startAgent({
      plugins: [{ plugin: testPlugin({ name: 'gated', sync: () => firstSync }) }],
      readinessChecks: { informers: () => (informersSynced ? undefined : 'informers have not synced') },
    });
    const pending = await get(`${agent.healthUrl}/readyz`);
    expect(pending.status).toBe(500);
    expect(pending.body).toContain('[-]informers failed: informers have not synced');
    expect(pending.body).toContain('[-]gated failed: first sync has not ended yet');
    expect((await get(`${agent.healthUrl}/healthz`)).status).toBe(200);

    finishFirstSync();
    await waitFor('the first sync', () => agent.health.status('gated')?.firstSyncEnded === true);
    const stillWaiting = await get(`${agent.healthUrl}/readyz?verbose`);
    expect(stillWaiting).toEqual({
      status: 500,
      body: '[-]informers failed: informers have not synced\n[+]gated ok\nreadyz check failed\n',
    });

    informersSynced = true;
    expect(await get(`${agent.healthUrl}/readyz`)).toEqual({ status: 200, body: 'OK\n' });
    expect(await get(`${agent.healthUrl}/readyz?verbose`)).toEqual({
      status: 200,
      body: '[+]informers ok\n[+]gated ok\nreadyz check passed\n',
    });
    expect(await get(`${agent.healthUrl}/readyz/gated`)).toEqual({ status: 200, body: 'OK\n' });
  });

  it('is ready after a first sync that failed: the initial sync is degraded, not fatal', async () => {
    const agent = await startAgent({
      plugins: [
        {
          plugin: testPlugin({
            name: 'broken',
            sync: async () => {
              throw new Error('policy x/deny-all failed');
            },
          }),
        },
      ],
    });
    await waitFor('readiness', async () => (await get(`${agent.healthUrl}/readyz`)).status === 200);
  });
});

describe('assembly', () => {
  it('stops each controller once its dependents have stopped, concurrently: a slow one does not eat the others\' budget', async () => {
    let leaderStoppedAfterMs: number | undefined;
    let stopAsked = 0;
    const agent = await startAgent({
      plugins: [
        // Listed first, so the old reverse-order stop reached the leader last, with the budget gone.
        { plugin: testPlugin({ name: 'leader', onStop: () => void (leaderStoppedAfterMs = performance.now() - stopAsked) }) },
        { plugin: testPlugin({ name: 'slow', onStop: () => new Promise((resolve) => setTimeout(resolve, 5_000)) }) },
      ],
      options: { nodeName: 'node-a', stopTimeoutMs: 1_000 },
    });
    stopAsked = performance.now();
    const report = await agent.stop();
    expect(report.notStopped).toEqual(['slow']);
    expect(leaderStoppedAfterMs).toBeDefined();
    expect(leaderStoppedAfterMs!).toBeLessThan(500);
  });

  it('creates plugins in dependency order, hands services along and stops in reverse order', async () => {
    const routes = defineServiceKey<{ add(route: string): void }>('test.routes');
    const clusterName = defineServiceKey<string>('test.cluster-name');
    const events: string[] = [];
    const received: string[] = [];
    const agent = await startAgent({
      plugins: [
        {
          plugin: testPlugin({
            name: 'bgp',
            requires: ['route-sync'],
            onCreate: (services) => {
              events.push('create bgp');
              services.get(routes).add(`10.0.0.0/24 in ${services.get(clusterName)}`);
            },
            onStart: () => void events.push('start bgp'),
            onStop: () => void events.push('stop bgp'),
          }),
        },
        {
          plugin: testPlugin({
            name: 'route-sync',
            onCreate: (services) => {
              events.push('create route-sync');
              services.provide(routes, { add: (route) => void received.push(route) });
            },
            onStart: () => void events.push('start route-sync'),
            onStop: () => void events.push('stop route-sync'),
          }),
        },
      ],
      services: [[clusterName, 'lab']],
    });
    expect(agent.controllers.map((c) => c.name)).toEqual(['route-sync', 'bgp']);
    expect(received).toEqual(['10.0.0.0/24 in lab']);
    await agent.stop();
    expect(events).toEqual([
      'create route-sync',
      'create bgp',
      'start route-sync',
      'start bgp',
      'stop bgp',
      'stop route-sync',
    ]);
  });

  it('wires requestSync to the scheduler', async () => {
    const reasons: string[] = [];
    let request!: (reason: string) => void;
    const agent = await startAgent({
      plugins: [
        {
          plugin: testPlugin({
            name: 'evented',
            minSyncIntervalMs: 10,
            sync: async ({ reason }) => void reasons.push(reason),
            onStart: (ctx) => (request = ctx.requestSync),
          }),
        },
      ],
    });
    await waitFor('the initial sync', () => reasons.length === 1);
    request('pod default/a changed');
    await waitFor('the requested sync', () => reasons.length === 2);
    expect(reasons).toEqual(['initial', 'pod default/a changed']);
    expect(agent.controllers).toHaveLength(1);
  });

  it('logs JSON lines carrying the controller name', async () => {
    const { logger, lines } = captureLogs();
    await startAgent({
      logger,
      plugins: [
        {
          plugin: testPlugin({
            name: 'noisy',
            sync: async () => {
              throw new Error('boom');
            },
          }),
        },
      ],
    });
    await waitFor('a failed sync log', () => lines.some((l) => l.msg === 'sync failed'));
    const controllerLines = lines.filter((l) => l.msg === 'sync failed' || l.msg === 'sync started');
    expect(controllerLines.length).toBeGreaterThanOrEqual(2);
    for (const line of controllerLines) expect(line.controller).toBe('noisy');
    const failed = lines.find((l) => l.msg === 'sync failed') as { err?: { message?: string } };
    expect(failed.err?.message).toBe('boom');
    expect(lines.find((l) => l.msg === 'agent started')).toMatchObject({ controllers: ['noisy'] });
  });
});

describe('servers', () => {
  it('serves health and metrics from one server when their ports are equal', async () => {
    const port = await freePort();
    const agent = await startAgent({
      plugins: [{ plugin: testPlugin({ name: 'one' }) }],
      options: {
        nodeName: 'node-a',
        health: { addr: '127.0.0.1', port },
        metrics: { addr: '127.0.0.1', port, path: '/custom-metrics' },
      },
    });
    expect(agent.healthUrl).toBe(`http://127.0.0.1:${port}`);
    expect(agent.metricsUrl).toBe(`http://127.0.0.1:${port}/custom-metrics`);
    expect((await get(`${agent.healthUrl}/livez`)).status).toBe(200);
    await waitFor('metrics', async () => (await get(agent.metricsUrl!)).body.includes(lastSuccess('one')));
    expect((await get(`${agent.healthUrl}/metrics`)).status).toBe(404);
  });

  it('runs the checks without a health server and serves no metrics unless asked', async () => {
    const agent = await startAgent({
      plugins: [{ plugin: testPlugin({ name: 'quiet' }) }],
      options: { nodeName: 'node-a', health: false, metrics: false },
    });
    expect(agent.healthUrl).toBeUndefined();
    expect(agent.metricsUrl).toBeUndefined();
    await waitFor('the first sync', () => agent.health.readinessChecks().every((c) => c.ok));
    expect(agent.health.livenessChecks()).toEqual([{ name: 'quiet', ok: true }]);
  });

  it('applies per-controller health windows and the default grace', async () => {
    const agent = await startAgent({
      plugins: [
        { plugin: testPlugin({ name: 'a', syncPeriodMs: 1_000 }) },
        { plugin: testPlugin({ name: 'b', syncPeriodMs: 1_000 }) },
      ],
      options: { nodeName: 'node-a', healthGraceMs: 500, healthWindowsMs: { b: 7_000 } },
    });
    expect(agent.health.status('a')?.windowMs).toBe(1_500);
    expect(agent.health.status('b')?.windowMs).toBe(7_000);
  });

  it('frees its ports on stop', async () => {
    const port = await freePort();
    const agent = await startAgent({
      plugins: [],
      options: { nodeName: 'node-a', health: { addr: '127.0.0.1', port }, metrics: false },
    });
    expect((await get(`${agent.healthUrl}/healthz`)).body).toBe('OK\n');
    await agent.stop();
    await expect(get(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
    const again = await startAgent({
      plugins: [],
      options: { nodeName: 'node-a', health: { addr: '127.0.0.1', port }, metrics: false },
    });
    expect(again.healthUrl).toBe(`http://127.0.0.1:${port}`);
  });
});

describe('start order and the wait for caches', () => {
  it('starts controllers, then waits for the caches, then runs the first sync', async () => {
    const order: string[] = [];
    await startAgent({
      plugins: [
        {
          plugin: testPlugin({
            name: 'ordered',
            syncPeriodMs: 60_000,
            onStart: () => void order.push('controller started'),
            sync: async () => void order.push('first sync'),
          }),
        },
      ],
      beforeFirstSync: async () => {
        order.push('waiting for caches');
        await sleep(50);
        order.push('caches synced');
      },
    });
    await waitFor('the first sync', () => order.includes('first sync'));
    expect(order).toEqual(['controller started', 'waiting for caches', 'caches synced', 'first sync']);
  });

  /** An agent whose only controller records whether it synced and whether it was stopped. */
  async function agentWaitingFor(beforeFirstSync: () => Promise<void>) {
    const seen = { stopped: false, synced: false };
    const agent = await createAgent({
      logger: captureLogs().logger,
      plugins: [
        {
          plugin: testPlugin({
            name: 'recorded',
            syncPeriodMs: 60_000,
            onStop: () => void (seen.stopped = true),
            sync: async () => void (seen.synced = true),
          }),
        },
      ],
      options: { nodeName: 'n', health: false, metrics: false, collectDefaultMetrics: false },
      beforeFirstSync,
    });
    return { agent, seen };
  }

  it('fails the start when the caches do not sync, stopping what it started', async () => {
    const { agent, seen } = await agentWaitingFor(() =>
      Promise.reject(new Error('informer caches did not sync within 1s (--cache-sync-timeout): pods')),
    );
    await expect(agent.start()).rejects.toThrow(/--cache-sync-timeout/);
    expect(seen).toEqual({ stopped: true, synced: false });
  });

  it('stops at once when told to during the wait for caches, running no sync', async () => {
    const { agent, seen } = await agentWaitingFor(() => new Promise(() => undefined));
    const starting = agent.start();
    await sleep(50);
    const started = performance.now();
    await agent.stop();
    await starting;
    expect(performance.now() - started).toBeLessThan(1_000);
    await sleep(50);
    expect(seen).toEqual({ stopped: true, synced: false });
  });
});
