import { describe } from 'vitest';
import { runControllerContractSuite } from '@kube-router/controller/contract';
import { toolLocks } from '@kube-router/netfilter';
import type { CommandRunner } from '@kube-router/netfilter';
import { routeSyncPlugin } from './plugin.js';
import { createRouteNode, createRouteSync, missingForRealTests } from './testing/world.js';

const missing = missingForRealTests();

// The faults break route-sync's real dependency, `ip`: `fail` points it at a network namespace that does not exist
// (every command fails as `ip netns exec` does), `hang` holds the process-wide iproute2 lock its commands take, as
// another plugin stuck in a long `ip -batch` would.
describe.skipIf(missing !== undefined)(`route-sync ${missing ? `(skipped: ${missing})` : ''}`, () => {
  runControllerContractSuite({
    name: 'route-sync',
    hangBoundMs: 2_500,
    plugin: { plugin: routeSyncPlugin, validOptions: { netns: 'trs-node', syncPeriodMs: 60_000, protocol: 17 } },
    async setup({ defer }) {
      const node = await createRouteNode('ct');
      // Released after the test, and also if the rest of the setup fails.
      defer(() => node.remove());
      let brokenNetns: string | undefined;
      const runner: CommandRunner = {
        run: (spec) => node.exec.run(brokenNetns && spec.netns ? { ...spec, netns: brokenNetns } : spec),
      };
      const { controller, health, metrics, service } = await createRouteSync(node, { syncTimeoutMs: 500 }, runner);
      service.setRoutes('contract', [
        { destination: '10.244.1.0/24', gateway: '192.0.2.2' },
        { destination: 'fd00:10:244:1::/64', gateway: '2001:db8::2' },
      ]);
      const releases: (() => void)[] = [];
      return {
        controller,
        health,
        metrics,
        faults: {
          fail() {
            brokenNetns = `${node.netns}-missing`;
          },
          hang: () =>
            new Promise<void>((held) => {
              void toolLocks.iproute2.runExclusive(
                () =>
                  new Promise<void>((release) => {
                    releases.push(release);
                    held();
                  }),
              );
            }),
          heal() {
            brokenNetns = undefined;
            for (const release of releases.splice(0)) release();
          },
        },
        teardown: async () => {},
      };
    },
  });
});
