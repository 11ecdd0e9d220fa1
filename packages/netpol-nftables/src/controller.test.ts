import { ServiceRegistry } from '@kube-router/controller';
import type { PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { createKubeContext, KubeServices, loadKubeConfig } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import { RecordingRunner } from '@kube-router/netfilter';
import { startApiServer } from '@kube-router/testkit';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createNetpolNftablesPlugin } from './plugin.js';

/** What the iptables backend leaves in the filter table: its top-level chain and the jump to it. */
const IPTABLES_LEFTOVERS = ['*filter', ':INPUT ACCEPT [0:0]', ':KUBE-ROUTER-INPUT - [0:0]', '-A INPUT -j KUBE-ROUTER-INPUT', 'COMMIT', ''].join('\n');

// A recording runner beside the real switch test (switch.real.test.ts): here the point is when the search runs.
describe('netpol-nftables controller: the iptables backend leftovers', () => {
  const stops: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const stop of stops.splice(0).reverse()) await stop();
  });

  it('are searched for at start, while the informers list; the first sync removes them, a sync after a failed removal searches again', async () => {
    const runner = new RecordingRunner()
      .on('nft -j list', { exitCode: 1, stderr: 'Error: No such file or directory' })
      .on((spec) => spec.command === 'iptables-save', { stdout: IPTABLES_LEFTOVERS })
      .once('iptables-restore', { exitCode: 4, stderr: 'iptables-restore: line 2 failed' });
    const searches = () => runner.invocations.filter((invocation) => invocation.command === 'iptables-save').length;
    const server = await startApiServer({ port: 0 });
    stops.push(() => server.close());
    const logger = pino({ level: 'silent' });
    const metrics = new AgentMetrics({ collectDefaultMetrics: false });
    const kube = createKubeContext({
      kubeConfig: loadKubeConfig({ kubeconfig: await server.writeKubeconfig(), env: {} }),
      nodeName: 'node-a',
      logger,
      metrics,
    });
    const services = new ServiceRegistry();
    services.provide(KubeServices, kube);
    const ctx: PluginContext = { nodeName: 'node-a', logger, metrics, health: new HealthRegistry({ defaultGraceMs: 5_000 }), services };
    const plugin = createNetpolNftablesPlugin({ runner });
    const controller = await plugin.create(ctx, plugin.options.parse({ enableIpv6: false, syncPeriodMs: 60_000 }));

    await controller.start({ requestSync: () => undefined, signal: new AbortController().signal });
    await expect.poll(searches).toBe(1);
    expect(runner.lines()).toContain('ipset list -n');
    await kube.informers.start({ cacheSyncTimeoutMs: 10_000 });
    stops.push(() => kube.informers.stop());

    const first = await controller.runObservedSync('initial');
    expect(first.ok).toBe(false);
    expect(String(first.ok ? '' : first.error)).toContain('iptables-leftovers');
    // The search start() began served the first sync; the removal came after the tables were written.
    expect(searches()).toBe(1);
    const lines = runner.lines();
    expect(lines.findIndex((line) => line.startsWith('iptables-restore'))).toBeGreaterThan(lines.findIndex((line) => line === 'nft -f -'));

    const second = await controller.runObservedSync('cluster changed');
    expect(second.ok).toBe(true);
    expect(searches()).toBe(2);
    const third = await controller.runObservedSync('cluster changed');
    expect(third.ok).toBe(true);
    expect(searches()).toBe(2);
    await controller.stop?.();
  });
});
