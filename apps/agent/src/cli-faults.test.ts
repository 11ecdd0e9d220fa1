import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { alive, freePort, get, waitFor } from './testing/support.js';
import { killSpawnedClis, parseLogs, spawnCli } from './testing/spawn-cli.js';

const FAULTS_CLI = 'src/testing/cli-with-faults.ts';
const ONLY_FIREWALL = ['--run-service-proxy=false', '--run-router=false'];
const ONLY_LOADBALANCER = ['--run-firewall=false', '--run-service-proxy=false', '--run-router=false', '--run-loadbalancer'];

afterEach(killSpawnedClis);

// Each test spawns the agent: tsx takes many seconds to start it on a loaded machine.
describe('stopping the agent while a kernel tool hangs', { timeout: 90_000 }, () => {
  let directory = '';
  let pidFile = '';
  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'tagd-hung-'));
    pidFile = join(directory, 'pids');
    // A stand-in iptables-restore that never exits, with a grandchild of its own (as a real tool's helpers would be).
    const standIn = join(directory, 'iptables-restore');
    await writeFile(standIn, `#!/bin/sh\nsleep 600 &\necho "$$ $!" >> ${pidFile}\nwait\n`);
    await chmod(standIn, 0o755);
  });
  afterAll(async () => {
    // Whatever a failed run left behind: only the processes this test's stand-in started.
    const pids = (await readFile(pidFile, 'utf8').catch(() => '')).split(/\s+/).filter(Boolean).map(Number);
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await rm(directory, { recursive: true, force: true });
  });

  it('kills the hung command with its process group at once and exits within two seconds', async () => {
    const cli = spawnCli(FAULTS_CLI, [...ONLY_FIREWALL, '--health-port=0'], { PATH: `${directory}:${process.env.PATH}` });
    await waitFor('the stand-in to run', async () => (await readFile(pidFile, 'utf8').catch(() => '')).trim() !== '', 60_000);
    const [shell, grandchild] = (await readFile(pidFile, 'utf8')).trim().split(' ').map(Number) as [number, number];
    expect(await alive(shell)).toBe(true);

    const signalled = performance.now();
    cli.child.kill('SIGINT');
    const code = await cli.exit;
    const stopMs = performance.now() - signalled;

    expect(code, cli.stderr()).toBe(0);
    // Before: the agent waited out its 20 s stop timeout (21 s in all) and left the child running.
    expect(stopMs).toBeLessThan(2_000);
    expect(await alive(shell)).toBe(false);
    expect(await alive(grandchild)).toBe(false);
    const logs = parseLogs(cli.stdout());
    expect(logs.find((l) => l.msg === 'stopping')).toMatchObject({ signal: 'SIGINT', killedCommands: 1 });
    expect(logs.find((l) => l.msg === 'agent stopped')).toMatchObject({ notStopped: [] });
    const failed = logs.find((l) => l.msg === 'sync failed' && l.controller === 'tool-runner');
    expect(JSON.stringify(failed?.err)).toContain('killed: the agent is stopping');
  });
});

describe('errors nobody handles', { timeout: 90_000 }, () => {
  it('logs an unhandled rejection with its error and keeps the agent running', async () => {
    const port = await freePort();
    const cli = spawnCli(FAULTS_CLI, [...ONLY_LOADBALANCER, '--health-addr=127.0.0.1', `--health-port=${port}`]);
    await waitFor('the agent to be ready', async () => (await get(`http://127.0.0.1:${port}/readyz`).catch(() => ({ status: 0 }))).status === 200, 60_000);
    // The line is written at start, but reaches this process through the child's stdout pipe, which may lag behind
    // the readiness answer on a loaded machine.
    const rejectionLine = () => parseLogs(cli.stdout()).find((l) => l.msg.startsWith('unhandled promise rejection'));
    await waitFor('the unhandled rejection to be logged', () => rejectionLine() !== undefined, 10_000).catch(() => undefined);
    const line = rejectionLine();
    expect(line).toMatchObject({ level: 50, err: { message: 'a rejection nobody handles' } });
    expect((await get(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    cli.child.kill('SIGTERM');
    expect(await cli.exit).toBe(0);
  });

  it('logs an uncaught exception at fatal level and exits 1 for the DaemonSet to restart it', async () => {
    const cli = spawnCli(FAULTS_CLI, [...ONLY_LOADBALANCER, '--health-port=0'], { TAGD_UNCAUGHT: '1' });
    expect(await cli.exit).toBe(1);
    const line = parseLogs(cli.stdout()).find((l) => l.level === 60);
    expect(line).toMatchObject({ msg: expect.stringContaining('uncaught exception'), err: { message: 'an exception nobody catches' } });
  });
});

describe('the agent as operators see it', { timeout: 90_000 }, () => {
  it('writes readable text lines with --log-format=text', async () => {
    const cli = spawnCli(FAULTS_CLI, [...ONLY_LOADBALANCER, '--health-port=0', '--log-format=text']);
    await waitFor('the agent to start', () => cli.stdout().includes('agent started'), 60_000);
    cli.child.kill('SIGTERM');
    expect(await cli.exit).toBe(0);
    const lines = cli.stdout().split('\n').filter(Boolean);
    expect(lines.some((line) => line.startsWith('{'))).toBe(false);
    expect(lines.find((line) => line.includes('agent started'))).toMatch(/^\[[\d:. ]+\] INFO.*: agent started/);
  });

  it('says where its node name came from', async () => {
    const cli = spawnCli(FAULTS_CLI, [...ONLY_LOADBALANCER, '--health-port=0', '--hostname-override=tagd-override']);
    await waitFor('the agent to start', () => cli.stdout().includes('agent started'), 60_000);
    cli.child.kill('SIGTERM');
    await cli.exit;
    const line = parseLogs(cli.stdout()).find((l) => l.msg.startsWith('node name'));
    expect(line).toMatchObject({ nodeName: 'tagd-override', from: '--hostname-override', node: 'tagd-override' });
  });

  it('serves health on every address by default (IPv4 and IPv6), and kube_router_build_info', async () => {
    const [health, metrics] = [await freePort(), await freePort()];
    const cli = spawnCli(FAULTS_CLI, [...ONLY_LOADBALANCER, `--health-port=${health}`, `--metrics-port=${metrics}`]);
    await waitFor('the agent to start', () => cli.stdout().includes('agent started'), 60_000);
    expect((await get(`http://127.0.0.1:${health}/healthz`)).status).toBe(200);
    expect((await get(`http://[::1]:${health}/healthz`)).status).toBe(200);
    const scraped = (await get(`http://[::1]:${metrics}/metrics`)).body;
    expect(scraped).toMatch(
      new RegExp(`^kube_router_build_info\\{version="0\\.1\\.0",nodeversion="${process.version.replaceAll('.', '\\.')}",typescriptversion="5\\.9\\.3"\\} 1$`, 'm'),
    );
    cli.child.kill('SIGTERM');
    expect(await cli.exit).toBe(0);
  });
});
