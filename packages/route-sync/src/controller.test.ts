import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { JoinedSyncError, routeSyncServiceKey, ServiceRegistry } from '@kube-router/controller';
import type { PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { AgentMetrics } from '@kube-router/metrics';
import { RecordingRunner } from '@kube-router/netfilter';
import type { CommandSpec } from '@kube-router/netfilter';
import { createRouteSyncPlugin } from './plugin.js';
import { metricValue } from './testing/world.js';

// The same paths as route-sync.real.test.ts, against a scripted `ip`: what is sent, and how answers are read.
const isList = (family: '-4' | '-6') => (spec: CommandSpec) => spec.args?.[0] === '-j' && spec.args[1] === family;
const isBatch = (spec: CommandSpec) => spec.args?.includes('-batch') ?? false;

async function start(runner: RecordingRunner) {
  const ctx: PluginContext = {
    nodeName: 'trs-node',
    logger: pino({ level: 'silent' }),
    metrics: new AgentMetrics({ collectDefaultMetrics: false }),
    health: new HealthRegistry({ defaultGraceMs: 1_000 }),
    services: new ServiceRegistry(),
  };
  const plugin = createRouteSyncPlugin({ runner });
  // No adoption grace: these cases read the kernel's leftovers as an earlier run's routes to remove at once (the grace
  // itself is tested for real in route-sync.real.test.ts).
  const controller = await plugin.create(ctx, plugin.options.parse({ netns: 'trs-node', adoptionGraceMs: 0, enableIpv6: true }));
  await controller.start({ requestSync: () => undefined, signal: new AbortController().signal });
  return { controller, ctx, service: ctx.services.get(routeSyncServiceKey) };
}

describe('route-sync against a scripted ip', () => {
  it('lists both families in every table by protocol 17, then sends one batch of only the changes', async () => {
    const runner = new RecordingRunner()
      .on(isList('-4'), {
        stdout: JSON.stringify([
          { dst: '10.244.1.0/24', gateway: '192.0.2.2', dev: 'eth0', flags: [] },
          { dst: '10.244.9.0/24', gateway: '192.0.2.9', dev: 'eth0', flags: [] },
        ]),
      })
      .on(isList('-6'), { stdout: '' });
    const { controller, ctx, service } = await start(runner);
    service.setRoutes('bgp', [
      { destination: '10.244.1.0/24', gateway: '192.0.2.2' },
      { destination: 'fd00:10:244:1::/64', gateway: '2001:db8::2' },
    ]);
    expect((await controller.runObservedSync('test')).ok).toBe(true);
    expect(runner.invocations.map((i) => [i.line, i.netns])).toEqual([
      ['ip -j -4 route show table all proto 17', 'trs-node'],
      ['ip -j -6 route show table all proto 17', 'trs-node'],
      ['ip -force -batch -', 'trs-node'],
    ]);
    expect(runner.invocations[2]!.input).toBe(
      'route del 10.244.9.0/24 proto 17 table 254\nroute add fd00:10:244:1::/64 via 2001:db8::2 proto 17 table 254\n',
    );
    expect(await metricValue(ctx.metrics, 'kube_router_host_routes_synced')).toBe(2);
    expect(await metricValue(ctx.metrics, 'kube_router_host_routes_added')).toBe(1);
    expect(await metricValue(ctx.metrics, 'kube_router_host_routes_removed')).toBe(1);
  });

  it('runs no batch when the kernel already holds exactly the wanted routes', async () => {
    const runner = new RecordingRunner()
      .on(isList('-4'), { stdout: JSON.stringify([{ dst: '10.244.1.0/24', gateway: '192.0.2.2', dev: 'eth0', flags: [] }]) })
      .on(isList('-6'), { stdout: '[]' });
    const { controller, service } = await start(runner);
    service.setRoutes('bgp', [{ destination: '10.244.1.0/24', gateway: '192.0.2.2' }]);
    expect((await controller.runObservedSync('test')).ok).toBe(true);
    expect(runner.invocations.filter(isBatch)).toEqual([]);
  });

  it('reports each failed command against its route, and a failed listing against its family', async () => {
    const runner = new RecordingRunner()
      .on(isList('-4'), { stdout: '[]' })
      .on(isList('-6'), { exitCode: 2, stderr: 'Error: something about IPv6.\n' })
      .on(isBatch, { exitCode: 1, stderr: 'RTNETLINK answers: File exists\nCommand failed -:1\n' });
    const { controller, ctx, service } = await start(runner);
    service.setRoutes('bgp', [
      { destination: '10.244.1.0/24', gateway: '192.0.2.2' },
      { destination: '10.244.2.0/24', gateway: '192.0.2.3' },
      { destination: 'fd00:10:244:1::/64', gateway: '2001:db8::2' },
    ]);
    const outcome = await controller.runObservedSync('test');
    const error = (outcome as { error: JoinedSyncError }).error;
    expect(error).toBeInstanceOf(JoinedSyncError);
    expect(error.failures.map((f) => f.object)).toEqual(['routes/ipv6', 'route/10.244.1.0/24']);
    expect(error.message).toContain('a route that route-sync does not own holds 10.244.1.0/24');
    expect(await metricValue(ctx.metrics, 'kube_router_host_routes_synced')).toBe(1);
  });
});
