import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { JoinedSyncError } from '@kube-router/controller';
import type { CommandRunner } from '@kube-router/netfilter';
import { createRouteSyncPlugin } from './plugin.js';
import {
  createRouteNode,
  createRouteSync,
  metricValue,
  missingForRealTests,
  runScheduled,
  waitFor,
  type RouteNode,
} from './testing/world.js';

const missing = missingForRealTests();
const OURS = 17;

describe.skipIf(missing !== undefined)(`route-sync in a network namespace ${missing ? `(skipped: ${missing})` : ''}`, () => {
  let node: RouteNode;
  const stops: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    node = await createRouteNode();
  });
  afterEach(async () => {
    for (const stop of stops.splice(0)) await stop();
    // Each test starts from a node without routes of ours (the cleanup hook is tested on its own below).
    for (const protocol of [OURS, 4]) {
      for (const family of ['ipv4', 'ipv6'] as const) {
        const routes = await node.ip.routes({ family, table: 'all', protocol });
        await node.ip.batchEach(routes.map((r) => `route del ${r.dst} proto ${protocol} table ${r.table ?? 'main'}`));
      }
    }
  });
  afterAll(() => node?.remove());

  it('installs the handed routes of both families with protocol 17 and counts them', async () => {
    const rs = await createRouteSync(node);
    const running = await runScheduled(rs.controller);
    stops.push(running.stop);
    rs.service.setRoutes('bgp', [
      { destination: '10.244.1.0/24', gateway: '192.0.2.2' },
      { destination: 'fd00:10:244:1::/64', gateway: '2001:db8::2' },
      { destination: '10.244.2.0/24', device: 'trs0' },
      { destination: '10.244.3.0/24', gateway: '192.0.2.3', table: 100 },
    ]);
    await waitFor('four routes', async () => (await node.routesOf(OURS)).size === 4);
    expect(Object.fromEntries(await node.routesOf(OURS))).toEqual({
      '10.244.1.0/24': '192.0.2.2',
      'fd00:10:244:1::/64': '2001:db8::2',
      '10.244.2.0/24': 'dev trs0',
      '10.244.3.0/24 table 100': '192.0.2.3',
    });
    await waitFor('the synced gauge', async () => (await metricValue(rs.metrics, 'kube_router_host_routes_synced')) === 4);
    expect(await metricValue(rs.metrics, 'kube_router_host_routes_added')).toBe(4);
    const exposition = await rs.metrics.registry.metrics();
    expect(exposition).toMatch(/^kube_router_host_routes_sync_time_count [1-9]/m);
    expect(exposition).toContain('# TYPE kube_router_host_routes_added counter');
  });

  it('puts back a route deleted by hand within one sync period', async () => {
    const rs = await createRouteSync(node, { syncPeriodMs: 1_000 });
    rs.service.setRoutes('bgp', [{ destination: '10.244.1.0/24', gateway: '192.0.2.2' }, { destination: 'fd00:10:244:1::/64', gateway: '2001:db8::2' }]);
    const running = await runScheduled(rs.controller);
    stops.push(running.stop);
    await waitFor('the routes', async () => (await node.routesOf(OURS)).size === 2);
    await node.ip.batch(['route del 10.244.1.0/24', 'route del fd00:10:244:1::/64']);
    const deletedAt = performance.now();
    expect((await node.routesOf(OURS)).size).toBe(0);
    await waitFor('the routes to be back', async () => (await node.routesOf(OURS)).size === 2, 3_000);
    // Back by the periodic sync (nothing asked for one), within its period plus the time of one sync.
    expect(performance.now() - deletedAt).toBeLessThan(1_500);
    expect(await metricValue(rs.metrics, 'kube_router_host_routes_added')).toBe(4);
    // Reported as drift: counted by kind, not mistaken for a change an owner asked for.
    await waitFor('the drift count', async () => (await rs.metrics.registry.metrics()).includes(
      'kube_router_controller_drift_repaired_total{controller="route-sync",object="route"} 2',
    ));
  });

  it('reports a route replaced by hand as drift and puts ours back; a change an owner asked for is no drift', async () => {
    const rs = await createRouteSync(node, { syncPeriodMs: 1_000 });
    rs.service.setRoutes('bgp', [{ destination: '10.244.1.0/24', gateway: '192.0.2.2' }]);
    const running = await runScheduled(rs.controller);
    stops.push(running.stop);
    await waitFor('the route', async () => (await node.routesOf(OURS)).get('10.244.1.0/24') === '192.0.2.2');
    rs.service.setRoutes('bgp', [{ destination: '10.244.1.0/24', gateway: '192.0.2.3' }]);
    await waitFor('the owner\'s change', async () => (await node.routesOf(OURS)).get('10.244.1.0/24') === '192.0.2.3');
    await node.ip.batch([`route replace 10.244.1.0/24 via 192.0.2.2 proto ${OURS}`]);
    await waitFor('ours back', async () => (await node.routesOf(OURS)).get('10.244.1.0/24') === '192.0.2.3', 3_000);
    const drift = (await rs.metrics.registry.metrics()).split('\n').filter((line) => line.startsWith('kube_router_controller_drift_repaired_total{'));
    expect(drift).toEqual(['kube_router_controller_drift_repaired_total{controller="route-sync",object="route"} 1']);
  });

  it('removes a withdrawn route and keeps it gone through later syncs (kube-router #1738)', async () => {
    const rs = await createRouteSync(node, { syncPeriodMs: 300 });
    rs.service.setRoutes('bgp', [{ destination: '10.244.1.0/24', gateway: '192.0.2.2' }, { destination: '10.244.2.0/24', gateway: '192.0.2.3' }]);
    const running = await runScheduled(rs.controller);
    stops.push(running.stop);
    await waitFor('the routes', async () => (await node.routesOf(OURS)).size === 2);
    rs.service.setRoutes('bgp', [{ destination: '10.244.2.0/24', gateway: '192.0.2.3' }]);
    await waitFor('the withdrawn route to leave', async () => !(await node.routesOf(OURS)).has('10.244.1.0/24'));
    const syncs = running.scheduler.syncs;
    await waitFor('three more periodic syncs', () => running.scheduler.syncs >= syncs + 3, 5_000);
    expect([...(await node.routesOf(OURS)).keys()]).toEqual(['10.244.2.0/24']);
    expect(await metricValue(rs.metrics, 'kube_router_host_routes_removed')).toBe(1);
    expect(await metricValue(rs.metrics, 'kube_router_host_routes_synced')).toBe(1);
  });

  it('removes on its first sync, with no adoption grace, the routes of ours that an earlier run left and nobody wants now', async () => {
    await node.ip.batch(['route add 10.250.0.0/24 via 192.0.2.7 proto 17', 'route add fd00:250::/64 via 2001:db8::7 proto 17 table 42']);
    const rs = await createRouteSync(node, { adoptionGraceMs: 0 });
    await rs.controller.start({ requestSync: () => undefined, signal: new AbortController().signal });
    stops.push(() => rs.controller.stop());
    const outcome = await rs.controller.runObservedSync('initial');
    expect(outcome.ok, outcome.ok ? '' : String(outcome.error)).toBe(true);
    expect((await node.routesOf(OURS)).size).toBe(0);
    expect(await metricValue(rs.metrics, 'kube_router_host_routes_removed')).toBe(2);
  });

  it('keeps an earlier run’s routes through the adoption grace (an agent restart), then removes those nobody relearned', async () => {
    await node.ip.batch([
      'route add 10.250.0.0/24 via 192.0.2.7 proto 17',
      'route add 10.250.1.0/24 via 192.0.2.7 proto 17',
      'route add 10.250.2.0/24 via 192.0.2.7 proto 17',
    ]);
    const requests: string[] = [];
    const rs = await createRouteSync(node, { adoptionGraceMs: 1_500 });
    await rs.controller.start({ requestSync: (reason) => requests.push(reason), signal: new AbortController().signal });
    stops.push(() => rs.controller.stop());
    expect((await rs.controller.runObservedSync('initial')).ok).toBe(true);
    // Nobody has relearned anything yet: the kernel keeps forwarding on the old routes.
    expect(Object.fromEntries(await node.routesOf(OURS))).toEqual({
      '10.250.0.0/24': '192.0.2.7',
      '10.250.1.0/24': '192.0.2.7',
      '10.250.2.0/24': '192.0.2.7',
    });
    // One is relearned with a new next hop, one is relearned and then withdrawn within the grace: both are this run's now.
    rs.service.setRoutes('bgp', [{ destination: '10.250.0.0/24', gateway: '192.0.2.8' }, { destination: '10.250.1.0/24', gateway: '192.0.2.7' }]);
    expect((await rs.controller.runObservedSync('routes changed')).ok).toBe(true);
    rs.service.setRoutes('bgp', [{ destination: '10.250.0.0/24', gateway: '192.0.2.8' }]);
    expect((await rs.controller.runObservedSync('routes changed')).ok).toBe(true);
    expect(Object.fromEntries(await node.routesOf(OURS))).toEqual({ '10.250.0.0/24': '192.0.2.8', '10.250.2.0/24': '192.0.2.7' });
    expect(await metricValue(rs.metrics, 'kube_router_host_routes_removed')).toBe(1);
    // The grace ends with a sync request; that sync removes the route nobody relearned.
    await waitFor('the end of the adoption grace', () => requests.includes('adoption grace over'), 5_000);
    expect((await rs.controller.runObservedSync('adoption grace over')).ok).toBe(true);
    expect(Object.fromEntries(await node.routesOf(OURS))).toEqual({ '10.250.0.0/24': '192.0.2.8' });
  });

  it('never touches a route of another protocol, even at a destination it wants', async () => {
    await node.ip.batch(['route add 10.244.9.0/24 via 192.0.2.9 proto static', 'route add 10.244.8.0/24 via 192.0.2.8 proto static']);
    const rs = await createRouteSync(node);
    await rs.controller.start({ requestSync: () => undefined, signal: new AbortController().signal });
    stops.push(() => rs.controller.stop());
    rs.service.setRoutes('bgp', [{ destination: '10.244.9.0/24', gateway: '192.0.2.2' }, { destination: '10.244.1.0/24', gateway: '192.0.2.2' }]);
    const outcome = await rs.controller.runObservedSync('contract');
    expect(outcome.ok).toBe(false);
    if (!outcome.ok) {
      expect(outcome.error).toBeInstanceOf(JoinedSyncError);
      expect((outcome.error as JoinedSyncError).failures.map((f) => f.object)).toEqual(['route/10.244.9.0/24']);
      expect(String((outcome.error as Error).message)).toContain('a route that route-sync does not own holds 10.244.9.0/24');
    }
    expect(Object.fromEntries(await node.routesOf(4))).toEqual({ '10.244.8.0/24': '192.0.2.8', '10.244.9.0/24': '192.0.2.9' });
    expect(Object.fromEntries(await node.routesOf(OURS))).toEqual({ '10.244.1.0/24': '192.0.2.2' });
    rs.service.setRoutes('bgp', []);
    expect((await rs.controller.runObservedSync('contract')).ok).toBe(true);
    expect((await node.routesOf(4)).size).toBe(2);
  });

  it('attempts every route: an unreachable gateway and a bad route fail, joined, and the others are installed', async () => {
    const rs = await createRouteSync(node);
    await rs.controller.start({ requestSync: () => undefined, signal: new AbortController().signal });
    stops.push(() => rs.controller.stop());
    rs.service.setRoutes('bgp', [
      { destination: '10.244.1.0/24', gateway: '192.0.2.2' },
      { destination: '10.244.2.0/24', gateway: '10.99.0.1' },
      { destination: 'fd00:10:244:2::/64', gateway: '2001:db8:ffff::1' },
      { destination: '10.244.3.0/24', gateway: 'not-an-address' },
      { destination: 'fd00:10:244:4::/64', gateway: 'fe80::1%eth0' },
      { destination: 'fd00:10:244:3::/64', gateway: '2001:db8::3' },
    ]);
    const before = rs.health.status('route-sync')?.beats ?? 0;
    const outcome = await rs.controller.runObservedSync('contract');
    expect(outcome.ok).toBe(false);
    expect((rs.health.status('route-sync')?.beats ?? 0) - before).toBeGreaterThanOrEqual(2);
    const error = (outcome as { error: JoinedSyncError }).error;
    expect(error).toBeInstanceOf(JoinedSyncError);
    expect(error.failures.map((f) => f.object).sort()).toEqual(['route/10.244.2.0/24', 'route/10.244.3.0/24', 'route/fd00:10:244:2::/64', 'route/fd00:10:244:4::/64']);
    expect(error.message).toMatch(/route\/10\.244\.2\.0\/24: .*stderr: .*(invalid gateway|unreachable)/i);
    expect(Object.fromEntries(await node.routesOf(OURS))).toEqual({ '10.244.1.0/24': '192.0.2.2', 'fd00:10:244:3::/64': '2001:db8::3' });
    expect(await metricValue(rs.metrics, 'kube_router_host_routes_synced')).toBe(2);
    expect(await metricValue(rs.metrics, 'kube_router_controller_sync_failures_total', { controller: 'route-sync' })).toBe(1);
  });

  it('fails joined, with ip’s stderr, when ip cannot reach the node, and recovers when it can', async () => {
    let broken = true;
    const runner: CommandRunner = {
      run: (spec) => node.exec.run(broken && spec.netns ? { ...spec, netns: `${spec.netns}-missing` } : spec),
    };
    const rs = await createRouteSync(node, {}, runner);
    await rs.controller.start({ requestSync: () => undefined, signal: new AbortController().signal });
    stops.push(() => rs.controller.stop());
    rs.service.setRoutes('bgp', [{ destination: '10.244.1.0/24', gateway: '192.0.2.2' }]);
    const outcome = await rs.controller.runObservedSync('contract');
    expect(outcome.ok).toBe(false);
    const error = (outcome as { error: JoinedSyncError }).error;
    expect(error.failures.map((f) => f.object)).toEqual(['routes/ipv4', 'routes/ipv6']);
    expect(error.message).toContain('Cannot open network namespace');
    broken = false;
    expect((await rs.controller.runObservedSync('retry')).ok).toBe(true);
    expect([...(await node.routesOf(OURS)).keys()]).toEqual(['10.244.1.0/24']);
  });

  it('asks for a sync as soon as an owner changes its routes', async () => {
    const rs = await createRouteSync(node, { syncPeriodMs: 600_000, minSyncIntervalMs: 0 });
    const running = await runScheduled(rs.controller);
    stops.push(running.stop);
    await waitFor('the initial sync', () => running.scheduler.syncs >= 1);
    const asked = performance.now();
    rs.service.setRoutes('bgp', [{ destination: '10.244.1.0/24', gateway: '192.0.2.2' }]);
    await waitFor('the route', async () => (await node.routesOf(OURS)).size === 1, 2_000);
    expect(performance.now() - asked).toBeLessThan(1_000);
  });

  it('cleanup removes every route of our protocol, in every table, and nothing else', async () => {
    await node.ip.batch([
      'route add 10.250.0.0/24 via 192.0.2.7 proto 17',
      'route add 10.251.0.0/24 via 192.0.2.7 proto 17 table 42',
      'route add fd00:250::/64 via 2001:db8::7 proto 17',
      'route add 10.252.0.0/24 via 192.0.2.7 proto static',
    ]);
    const plugin = createRouteSyncPlugin({ runner: node.exec });
    const ctx = { nodeName: 'trs-node', logger: pino({ level: 'silent' }) };
    await plugin.cleanup!(ctx, plugin.options.parse({ netns: node.netns }));
    expect((await node.routesOf(OURS)).size).toBe(0);
    expect([...(await node.routesOf(4)).keys()]).toEqual(['10.252.0.0/24']);
    // Nothing to remove is a success too.
    await plugin.cleanup!(ctx, plugin.options.parse({ netns: node.netns }));
  });
});
