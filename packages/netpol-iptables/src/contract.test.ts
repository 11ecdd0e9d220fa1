import { randomBytes } from 'node:crypto';
import { ServiceRegistry } from '@kube-router/controller';
import type { PluginContext } from '@kube-router/controller';
import { runControllerContractSuite } from '@kube-router/controller/contract';
import { HealthRegistry } from '@kube-router/healthcheck';
import { createKubeContext, KubeServices, loadKubeConfig } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import { addNetns, deleteNetns, ExecRunner, toolLocks } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { startApiServer } from '@kube-router/testkit';
import pino from 'pino';
import { describe } from 'vitest';
import { createNetpolIptablesPlugin } from './plugin.js';
import { missingForRealTests } from './testing/world.js';

const missing = missingForRealTests();

// The faults break the plugin's real dependencies: `fail` points its iptables and ipset at a network namespace that
// does not exist (every command fails as `ip netns exec` does), `hang` holds the process-wide xtables and ipset
// locks its commands must take, as another plugin stuck in a long restore would.
describe.skipIf(missing !== undefined)('netpol-iptables', () => {
  runControllerContractSuite({
    name: 'netpol',
    plugin: { plugin: createNetpolIptablesPlugin(), validOptions: { netns: 'tnf-contract', syncPeriodMs: 60_000 } },
    hangBoundMs: 3_000,
    async setup({ defer }) {
      const exec = new ExecRunner();
      const netns = `krt-${randomBytes(3).toString('hex')}-ct`;
      await addNetns(exec, netns);
      // Released after the test, and also if what follows fails: a broken setup leaves no namespace behind.
      defer(() => deleteNetns(exec, netns));
      let brokenNetns: string | undefined;
      const runner: CommandRunner = {
        run: (spec) => exec.run(brokenNetns && spec.netns ? { ...spec, netns: brokenNetns } : spec),
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
      const plugin = createNetpolIptablesPlugin({ runner });
      const controller = await plugin.create(ctx, plugin.options.parse({ netns, syncTimeoutMs: 1_000, syncPeriodMs: 60_000 }));
      await kube.informers.start({ cacheSyncTimeoutMs: 10_000 });
      const releases: (() => void)[] = [];
      const hold = (lock: typeof toolLocks.xtables) =>
        new Promise<void>((held) => {
          void lock.runExclusive(() => new Promise<void>((release) => {
            releases.push(release);
            held();
          }));
        });
      return {
        controller,
        health,
        metrics,
        faults: {
          fail() {
            brokenNetns = `krt-${randomBytes(3).toString('hex')}-missing`;
          },
          async hang() {
            await Promise.all([hold(toolLocks.xtables), hold(toolLocks.ipset)]);
          },
          heal() {
            brokenNetns = undefined;
            for (const release of releases.splice(0)) release();
          },
        },
        async teardown() {
          await kube.informers.stop();
        },
      };
    },
  });
});
