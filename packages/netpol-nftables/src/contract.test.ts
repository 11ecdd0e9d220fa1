import { randomBytes } from 'node:crypto';
import { ServiceRegistry } from '@kube-router/controller';
import type { PluginContext } from '@kube-router/controller';
import { runControllerContractSuite } from '@kube-router/controller/contract';
import { HealthRegistry } from '@kube-router/healthcheck';
import { createKubeContext, KubeServices, loadKubeConfig } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import { addNetns, deleteNetns, ExecRunner, nftTableLock, toolLocks } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { startApiServer } from '@kube-router/testkit';
import pino from 'pino';
import { describe } from 'vitest';
import { tableRef } from './kernel.js';
import { createNetpolNftablesPlugin } from './plugin.js';
import { missingForRealTests } from './testing/world.js';

const missing = missingForRealTests();

// The faults break the plugin's real dependencies: `fail` points its nft (and the iptables and ipset of the leftover
// removal) at a network namespace that does not exist, `hang` holds the process-wide locks its commands must take
// (each table's nft lock, xtables, ipset), as another plugin stuck in a long transaction would.
describe.skipIf(missing !== undefined)(`netpol-nftables${missing ? ` (skipped: ${missing})` : ''}`, () => {
  runControllerContractSuite({
    name: 'netpol',
    plugin: { plugin: createNetpolNftablesPlugin(), validOptions: { netns: 'tnf-contract', syncPeriodMs: 60_000 } },
    hangBoundMs: 3_000,
    async setup({ defer }) {
      const exec = new ExecRunner();
      const netns = `krt-tnf${randomBytes(2).toString('hex')}-ct`;
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
      const plugin = createNetpolNftablesPlugin({ runner });
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
            brokenNetns = `krt-tnf${randomBytes(2).toString('hex')}-missing`;
          },
          async hang() {
            const tables = [nftTableLock(tableRef('ipv4')), nftTableLock(tableRef('ipv6'))];
            await Promise.all([...tables.map(hold), hold(toolLocks.xtables), hold(toolLocks.ipset)]);
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
