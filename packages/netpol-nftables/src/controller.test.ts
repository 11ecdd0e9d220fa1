import { ServiceRegistry } from '@kube-router/controller';
import type { PluginContext } from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { createKubeContext, KubeServices, loadKubeConfig } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import { RecordingRunner } from '@kube-router/netfilter';
import { createNetpolController } from '@kube-router/netpol';
import type { NetpolSources } from '@kube-router/netpol';
import { startApiServer } from '@kube-router/testkit';
import { fixturePod, fixturePolicy, smallClusterInput } from '@kube-router/testkit/netpol-conformance';
import type { FixturePod } from '@kube-router/testkit/netpol-conformance';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { netpolNftablesOptions } from './options.js';
import { createNftablesDataplane } from './dataplane.js';
import { createNetpolNftablesPlugin } from './plugin.js';

/** `nft -j list tables` of a namespace without tables. */
const NO_TABLES = JSON.stringify({ nftables: [{ metainfo: { json_schema_version: 1 } }] });

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
      .on('nft -j list tables', { stdout: NO_TABLES })
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

// A recording runner beside the real tests of the same paths (the conformance suite, kernel.real.test.ts): here the
// point is that what an event's sync keeps from the sync before (the node's render) never outlives what it came from.
describe('netpol-nftables controller: what an event\'s sync keeps', () => {
  it('keeps the node\'s objects for a change of peers, and writes them again when a local pod or the pod CIDRs change', async () => {
    const serverFromClients = fixturePolicy('web/server', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: 'client' } } }] }],
    });
    let cluster = smallClusterInput([serverFromClients]);
    let podCidrs = ['10.0.0.0/24'];
    const relabel = (id: string, pod: FixturePod) => {
      cluster = { ...cluster, pods: [...cluster.pods.filter((p) => `${p.metadata.namespace}/${p.metadata.name}` !== id), pod] };
    };
    const sources: NetpolSources = {
      pods: () => cluster.pods,
      namespaces: () => cluster.namespaces,
      policies: () => cluster.policies,
      hasSynced: () => true,
      onChange: () => () => undefined,
      warnPolicy: () => undefined,
      node: () => ({ metadata: { name: cluster.nodeName }, spec: { podCIDRs: podCidrs } }),
    };
    const runner = new RecordingRunner()
      .on('nft -j list', { exitCode: 1, stderr: 'Error: No such file or directory' })
      .on('nft -j list tables', { stdout: NO_TABLES });
    const logger = pino({ level: 'silent' });
    const metrics = new AgentMetrics({ collectDefaultMetrics: false });
    const ctx: PluginContext = { nodeName: cluster.nodeName, logger, metrics, health: new HealthRegistry({ defaultGraceMs: 5_000 }), services: new ServiceRegistry() };
    const options = netpolNftablesOptions.parse({ enableIpv6: false, defaultDeny: true, removeIptablesLeftovers: false, syncPeriodMs: 60_000 });
    const controller = createNetpolController(ctx, { sources }, options, createNftablesDataplane(ctx, options, runner));
    const scripts = async () => {
      runner.invocations.length = 0;
      const outcome = await controller.runObservedSync('cluster changed');
      if (!outcome.ok) throw outcome.error;
      return runner.invocations.filter((invocation) => invocation.args.includes('-f')).map((invocation) => invocation.input ?? '').join('\n');
    };
    await scripts();

    // A remote client more: one element into the peer set, nothing of the node.
    relabel('other/client-2', fixturePod('other/client-2', ['10.0.1.4'], { app: 'client' }, { node: 'node-b' }));
    const peers = await scripts();
    expect(peers).toMatch(/^add set ip kube-router-filter-ipv4 KUBE-SRC-[0-9A-F]{16} \{ type ipv4_addr; elements = \{ 10\.0\.1\.4 \} \}$/m);
    expect(peers).not.toContain('chain');

    // The local client becomes a server too: the policy now isolates it, so its pod chain and map entry appear.
    relabel('web/client', fixturePod('web/client', ['10.0.0.3', 'fd00::3'], { app: 'server' }));
    const local = await scripts();
    expect(local).toContain('10.0.0.3 : jump KUBE-POD-FW-');

    // The node's pod CIDRs change: the tail chain that guards them is written again.
    podCidrs = ['10.0.0.0/25'];
    const cidrs = await scripts();
    expect(cidrs).toContain('flush chain ip kube-router-filter-ipv4 KUBE-NWPLCY-TAIL');
    expect(cidrs).toContain('ip saddr 10.0.0.0/25 ');
    expect(await scripts()).toBe('');
  });
});
