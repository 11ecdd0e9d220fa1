/**
 * The kube-router CLI with a catalog of test plugins, for the CLI's end-to-end tests: the real catalog has no plugins
 * yet, and a test must see the CLI run controllers, refuse a bad assembly and stop on SIGTERM.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { runCli } from '../run-cli.js';
import { testPlugin } from './test-plugins.js';

const exitCode = await runCli(process.argv.slice(2), {
  catalog: {
    firewall: (config) => [
      {
        plugin: testPlugin({
          name: 'test-firewall',
          minSyncIntervalMs: 10,
          // A sync that takes a while, so that a stop has a running sync to wait for.
          sync: async ({ signal }) => {
            await sleep(300, undefined, { signal });
          },
        }),
        options: { syncPeriodMs: config.firewall.syncPeriodMs },
      },
    ],
    // Requires a plugin that no feature provides: a bad assembly.
    'service-proxy': () => [{ plugin: testPlugin({ name: 'test-proxy', requires: ['test-ipvs-helper'] }) }],
    // Options that its schema refuses.
    router: (config) => [
      { plugin: testPlugin({ name: 'test-router' }), options: { syncPeriodMs: -config.routing.syncPeriodMs } },
    ],
  },
});
process.exit(exitCode);
