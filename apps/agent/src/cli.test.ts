import { afterEach, describe, expect, it } from 'vitest';
import { freePort, get, waitFor } from './testing/support.js';
import { killSpawnedClis, parseLogs, spawnCli } from './testing/spawn-cli.js';

const REAL_CLI = 'src/cli.ts';
const TEST_CLI = 'src/testing/cli-with-test-catalog.ts';

afterEach(killSpawnedClis);

describe('kube-router CLI', () => {
  it('--help lists the flags and exits 0', async () => {
    const cli = spawnCli(REAL_CLI, ['--help']);
    expect(await cli.exit).toBe(0);
    for (const flag of ['--run-firewall', '--health-port', '--metrics-port', '--iptables-sync-period', '--kubeconfig']) {
      expect(cli.stdout()).toContain(flag);
    }
  });

  it('exits 2 on a bad flag', async () => {
    const cli = spawnCli(REAL_CLI, ['--iptables-sync-period=5']);
    expect(await cli.exit).toBe(2);
    expect(cli.stderr()).toContain('invalid duration "5": missing unit');
  });

  it('exits 2 when an enabled feature has no plugin in the build, naming the flag', async () => {
    const cli = spawnCli(TEST_CLI, ['--run-firewall=false', '--run-router=false', '--run-service-proxy=false', '--run-loadbalancer']);
    expect(await cli.exit).toBe(2);
    expect(cli.stderr()).toContain(
      'kube-router: this build cannot do what the command line asks:\n' +
        '  - --run-loadbalancer: this build has no plugin for loadbalancer; disable it with --run-loadbalancer=false\n',
    );
  });

  it('takes pflag forms of -v that kube-router manifests use (-v=2, -v 2)', async () => {
    for (const args of [['-v=2'], ['-v', '2']]) {
      const cli = spawnCli(REAL_CLI, [...args, '--version']);
      expect(await cli.exit, cli.stderr()).toBe(0);
    }
  });

  it('exits 2 on a bad assembly', async () => {
    const cli = spawnCli(TEST_CLI, ['--run-firewall=false', '--run-router=false', '--health-port=0']);
    expect(await cli.exit).toBe(2);
    expect(cli.stderr()).toContain(
      'invalid plugin assembly: plugin test-proxy requires test-ipvs-helper, which is not in the assembly',
    );
    expect(parseLogs(cli.stdout()).find((l) => l.level === 60)?.msg).toContain('test-ipvs-helper');
  });

  it('exits 2 on plugin options its schema refuses', async () => {
    const cli = spawnCli(TEST_CLI, ['--run-firewall=false', '--run-service-proxy=false', '--health-port=0']);
    expect(await cli.exit).toBe(2);
    expect(cli.stderr()).toMatch(/plugin test-router: bad option syncPeriodMs: /);
  });

  it('runs the controllers, then stops them on SIGTERM and exits 0', async () => {
    const port = await freePort();
    const cli = spawnCli(TEST_CLI, [
      '--run-service-proxy=false',
      '--run-router=false',
      '--health-addr=127.0.0.1',
      `--health-port=${port}`,
      '--iptables-sync-period=400ms',
      '--v=2',
    ]);
    const url = `http://127.0.0.1:${port}`;
    await waitFor(
      'the CLI to be ready',
      async () => (await get(`${url}/readyz`).catch(() => ({ status: 0 }))).status === 200,
      20_000,
    );
    expect((await get(`${url}/healthz?verbose`)).body).toBe('[+]test-firewall ok\nhealthz check passed\n');
    // Let a periodic sync be running when the signal comes: the stop waits for it.
    await waitFor('a periodic sync', () => parseLogs(cli.stdout()).some((l) => l.reason === 'periodic'));
    cli.child.kill('SIGTERM');
    expect(await cli.exit).toBe(0);

    const logs = parseLogs(cli.stdout());
    const messages = logs.map((l) => l.msg);
    expect(messages.indexOf('stopping')).toBeLessThan(messages.indexOf('controller stopped'));
    expect(messages.indexOf('controller stopped')).toBeLessThan(messages.indexOf('agent stopped'));
    expect(logs.find((l) => l.msg === 'agent stopped')).toMatchObject({ notStopped: [] });
    expect(logs.find((l) => l.msg === 'stopping')).toMatchObject({ signal: 'SIGTERM' });
    for (const line of logs.filter((l) => ['sync started', 'sync ended', 'controller stopped'].includes(l.msg))) {
      expect(line.controller).toBe('test-firewall');
    }
    expect(logs.every((l) => l.node === 'krt-node')).toBe(true);
    await expect(get(`${url}/healthz`)).rejects.toThrow();
  });
});
