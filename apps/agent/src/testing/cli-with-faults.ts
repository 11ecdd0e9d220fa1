/**
 * The kube-router CLI with plugins that misbehave the ways a real agent can, for the CLI's end-to-end tests:
 *
 * - firewall: `tool-runner`, whose every sync runs `iptables-restore` through netfilter's ExecRunner (kube-router's
 *   30 s command timeout). A test puts a stand-in that never exits first on PATH.
 * - loadbalancer: `faulty`, whose start leaves a promise rejection unhandled, and with TAGD_UNCAUGHT=1 also throws
 *   from a timer (an uncaught exception).
 */
import { ExecRunner } from '@kube-router/netfilter';
import { runCli } from '../run-cli.js';
import { testPlugin } from './test-plugins.js';

const runner = new ExecRunner();

const exitCode = await runCli(process.argv.slice(2), {
  catalog: {
    firewall: () => [
      {
        plugin: testPlugin({
          name: 'tool-runner',
          syncTimeoutMs: 0,
          sync: async () => {
            await runner.run({ command: 'iptables-restore', args: ['--noflush'], input: '*filter\nCOMMIT\n' });
          },
        }),
      },
    ],
    loadbalancer: () => [
      {
        plugin: testPlugin({
          name: 'faulty',
          onStart: () => {
            void Promise.reject(new Error('a rejection nobody handles'));
            if (process.env.TAGD_UNCAUGHT === '1') {
              setTimeout(() => {
                throw new Error('an exception nobody catches');
              }, 300);
            }
          },
        }),
      },
    ],
  },
});
process.exit(exitCode);
