import { ServiceRegistry } from '@kube-router/controller';
import type { PluginContext } from '@kube-router/controller';
import { runControllerContractSuite } from '@kube-router/controller/contract';
import { HealthRegistry } from '@kube-router/healthcheck';
import { createKubeContext, KubeServices, loadKubeConfig } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import { CommandError } from '@kube-router/netfilter';
import type { CommandResult, CommandRunner, CommandSpec } from '@kube-router/netfilter';
import { startApiServer } from '@kube-router/testkit';
import pino from 'pino';
import { createProxyNftablesPlugin } from './plugin.js';

// The contract needs no kernel: a stand-in runner answers nft as an empty, healthy node would, and the faults make it
// fail as a missing tool does or hang as a stuck nft would. The same paths run against the kernel in proxy.real.test.ts.
const healthy = (spec: CommandSpec): CommandResult => ({ stdout: spec.args?.includes('-j') ? '{"nftables": []}' : '', stderr: '', exitCode: 0, durationMs: 0 });

runControllerContractSuite({
  name: 'proxy',
  hangBoundMs: 3_000,
  plugin: { plugin: createProxyNftablesPlugin(), validOptions: { syncPeriodMs: 60_000, enableIpv6: true } },
  async setup({ defer }) {
    let mode: 'ok' | 'fail' | 'hang' = 'ok';
    const hung: (() => void)[] = [];
    const runner: CommandRunner = {
      run(spec) {
        if (mode === 'fail') return Promise.reject(new CommandError({ command: spec.command, args: spec.args ?? [], exitCode: null, spawnError: 'ENOENT' }));
        if (mode === 'hang') return new Promise((resolve) => hung.push(() => resolve(healthy(spec))));
        return Promise.resolve(healthy(spec));
      },
    };
    const server = await startApiServer({ port: 0 });
    defer(() => server.close());
    const kubeconfig = await server.writeKubeconfig();
    const logger = pino({ level: 'silent' });
    const metrics = new AgentMetrics({ collectDefaultMetrics: false });
    const health = new HealthRegistry({ defaultGraceMs: 5_000 });
    const kube = createKubeContext({ kubeConfig: loadKubeConfig({ kubeconfig, env: {} }), nodeName: 'contract', logger, metrics });
    const services = new ServiceRegistry();
    services.provide(KubeServices, kube);
    const ctx: PluginContext = { nodeName: 'contract', logger, metrics, health, services };
    const plugin = createProxyNftablesPlugin({ runner });
    const controller = await plugin.create(ctx, plugin.options.parse({ syncTimeoutMs: 1_000, syncPeriodMs: 60_000 }));
    await kube.informers.start({ cacheSyncTimeoutMs: 10_000 });
    return {
      controller,
      health,
      metrics,
      faults: {
        fail: () => void (mode = 'fail'),
        hang: () => void (mode = 'hang'),
        heal() {
          mode = 'ok';
          for (const release of hung.splice(0)) release();
        },
      },
      async teardown() {
        await kube.informers.stop();
      },
    };
  },
});
