import { randomBytes } from 'node:crypto';
import { runControllerContractSuite } from '@kube-router/controller/contract';
import { addNetns, deleteNetns, ExecRunner } from '@kube-router/netfilter';
import type { CommandRunner, Mutex } from '@kube-router/netfilter';
import { startApiServer } from '@kube-router/testkit';
import { describe } from 'vitest';
import type { NetpolTestBackend } from './backend.js';
import { testPluginContext } from './context.js';
import { missingForRealTests } from './world.js';

/**
 * The controller contract suite (`@kube-router/controller/contract`) against the backend's plugin. The faults break
 * its real dependencies: `fail` points its commands at a network namespace that does not exist (every command fails
 * as `ip netns exec` does), `hang` holds the process-wide locks its commands must take, as another plugin stuck in a
 * long restore or transaction would.
 */
export function runNetpolContractSuite(backend: NetpolTestBackend): void {
  const missing = missingForRealTests(backend);
  describe.skipIf(missing !== undefined)(`netpol-${backend.name}${missing ? ` (skipped: ${missing})` : ''}`, () => {
    runControllerContractSuite({
      name: 'netpol',
      plugin: { plugin: backend.createPlugin(), validOptions: { netns: 'tnf-contract', syncPeriodMs: 60_000 } },
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
        const { ctx, kube, metrics, health } = testPluginContext(await server.writeKubeconfig(), 'contract');
        const plugin = backend.createPlugin({ runner });
        const options = plugin.options.parse({ netns, enableIpv6: true, syncTimeoutMs: 1_000, syncPeriodMs: 60_000 });
        const controller = await plugin.create(ctx, options);
        await kube.informers.start({ cacheSyncTimeoutMs: 10_000 });
        const releases: (() => void)[] = [];
        const hold = (lock: Mutex) =>
          new Promise<void>((held) => {
            void lock.runExclusive(
              () =>
                new Promise<void>((release) => {
                  releases.push(release);
                  held();
                }),
            );
          });
        const faults = {
          fail() {
            brokenNetns = `krt-tnf${randomBytes(2).toString('hex')}-missing`;
          },
          async hang() {
            await Promise.all(backend.locks.map(hold));
          },
          heal() {
            brokenNetns = undefined;
            for (const release of releases.splice(0)) release();
          },
        };
        return { controller, health, metrics, faults, teardown: () => kube.informers.stop() };
      },
    });
  });
}
