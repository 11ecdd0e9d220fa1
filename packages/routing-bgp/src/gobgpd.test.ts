import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { captureLogs } from '@kube-router/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { GobgpdSupervisor } from './gobgpd.js';
import { routingBgpPlugin } from './plugin.js';
import { loadGobgpApi } from './gobgp-api.js';

// A stand-in for gobgpd: it logs one JSON line as gobgpd does, optionally starts a child (to see the process group
// go), and exits or sleeps. The real gobgpd is supervised in routing-bgp.real.test.ts.
async function fakeGobgpd(dir: string, body: string): Promise<string> {
  const path = join(dir, 'gobgpd');
  await writeFile(path, `#!/bin/sh\necho '{"level":"warning","msg":"fake gobgpd","Topic":"test"}'\n${body}\n`);
  await chmod(path, 0o755);
  return path;
}

const until = async (what: string, check: () => boolean, timeoutMs = 10_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('GobgpdSupervisor', () => {
  let dir: string | undefined;
  let supervisor: GobgpdSupervisor | undefined;
  afterEach(async () => {
    await supervisor?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** A supervisor of a stand-in gobgpd that exits at once with code 3, with these restart delays. */
  async function crashLooping(initialRestartDelayMs: number, maxRestartDelayMs: number) {
    dir = await mkdtemp(join(tmpdir(), 'tbgp-sup-'));
    const { lines, logger } = captureLogs();
    const spawns: number[] = [];
    const started = new GobgpdSupervisor({
      binary: await fakeGobgpd(dir, 'exit 3'),
      apiHosts: [`unix://${dir}/api.sock`],
      logger,
      initialRestartDelayMs,
      maxRestartDelayMs,
      onSpawn: () => spawns.push(Date.now()),
    });
    supervisor = started;
    await started.start();
    return { supervisor: started, lines, spawns };
  }

  it('restarts a gobgpd that keeps dying with a doubling delay and forwards its log lines at their level', async () => {
    const { supervisor, lines, spawns } = await crashLooping(50, 200);
    await until('five spawns', () => spawns.length >= 5);
    const delays = lines.filter((l) => l.msg === 'gobgpd exited; restarting').map((l) => l.restartInMs);
    expect(delays.slice(0, 4)).toEqual([50, 100, 200, 200]);
    expect(supervisor.restarts).toBeGreaterThanOrEqual(4);
    const forwarded = lines.find((l) => l.msg === 'fake gobgpd');
    expect(forwarded).toMatchObject({ level: 40, component: 'gobgpd', gobgpd: { Topic: 'test' } });
  });

  it('while gobgpd crash-loops: a readiness reason naming its exit, at most one error line per backoff step', async () => {
    // What a gobgpd with a bad configuration or a missing library does.
    const { supervisor, lines, spawns } = await crashLooping(100, 400);
    await until('a first exit', () => /exited/.test(supervisor.notRunningReason() ?? ''));
    expect(supervisor.notRunningReason()).toMatch(/^gobgpd exited with code 3; restarting in \d+ ms \(\d+ restarts so far\)$/);
    await until('six spawns', () => spawns.length >= 6, 20_000);
    // Bounded: the delay stops doubling at its maximum; quiet: one error line per crash, not per retry of anything.
    const errors = lines.filter((l) => (l.level as number) >= 50);
    expect(errors.every((l) => l.msg === 'gobgpd exited; restarting')).toBe(true);
    expect(errors.length).toBeLessThanOrEqual(spawns.length);
    expect(Math.max(...errors.map((l) => l.restartInMs as number))).toBe(400);
    await supervisor.stop();
    expect(supervisor.notRunningReason()).toBeUndefined();
  });

  it('takes a gobgpd started again after a crash as ready only once it has stayed up 3 s', async () => {
    dir = await mkdtemp(join(tmpdir(), 'tbgp-sup-'));
    const { logger } = captureLogs();
    const marker = join(dir, 'crashed-once');
    // Exits with 3 the first time, then runs: a crash followed by a gobgpd that stays.
    const binary = await fakeGobgpd(dir, `if [ ! -e ${marker} ]; then touch ${marker}; exit 3; fi\nexec sleep 30`);
    const spawns: number[] = [];
    supervisor = new GobgpdSupervisor({ binary, apiHosts: [`unix://${dir}/api.sock`], logger, initialRestartDelayMs: 50, onSpawn: (pid) => spawns.push(pid) });
    await supervisor.start();
    await until('the second spawn', () => spawns.length >= 2);
    expect(supervisor.notRunningReason()).toMatch(/^gobgpd exited with code 3; restarted \d+ ms ago, ready once it has run 3000 ms \(1 restarts so far\)$/);
    expect(supervisor.notRunningReason(Date.now() + 3_000)).toBeUndefined();
  });

  it('reports nothing while gobgpd runs', async () => {
    dir = await mkdtemp(join(tmpdir(), 'tbgp-sup-'));
    const { logger } = captureLogs();
    let spawned = false;
    supervisor = new GobgpdSupervisor({ binary: await fakeGobgpd(dir, 'exec sleep 30'), apiHosts: [`unix://${dir}/api.sock`], logger, onSpawn: () => (spawned = true) });
    await supervisor.start();
    await until('the spawn', () => spawned);
    expect(supervisor.notRunningReason()).toBeUndefined();
  });

  it('stop() ends gobgpd with its process group and does not restart it', async () => {
    dir = await mkdtemp(join(tmpdir(), 'tbgp-sup-'));
    const childPidFile = join(dir, 'child.pid');
    const { logger } = captureLogs();
    supervisor = new GobgpdSupervisor({
      binary: await fakeGobgpd(dir, `sleep 300 & echo $! > ${childPidFile}\nwait`),
      apiHosts: [`unix://${dir}/api.sock`],
      logger,
    });
    await supervisor.start();
    const { readFile } = await import('node:fs/promises');
    let childPid = 0;
    await until('the grandchild', () => {
      void readFile(childPidFile, 'utf8').then((text) => (childPid = Number(text.trim())), () => undefined);
      return childPid > 0;
    });
    await supervisor.stop();
    expect(supervisor.pid).toBeUndefined();
    await until('the grandchild gone', () => {
      try {
        process.kill(childPid, 0);
        return false;
      } catch {
        return true;
      }
    });
    await new Promise((r) => setTimeout(r, 700));
    expect(supervisor.pid).toBeUndefined();
  });
});

describe('loadGobgpApi', () => {
  it('names the directory and the Debian package when the protos are absent', () => {
    expect(() => loadGobgpApi('/nonexistent/gobgp/api')).toThrow(/gobgp\.proto.*\/nonexistent\/gobgp\/api.*golang-github-osrg-gobgp-dev/);
  });
});

describe('routingBgpPlugin.tools', () => {
  it('names the gobgpd it runs (so an image without it is not ready, one line at start) and ip; not gobgpd it only drives', () => {
    expect(routingBgpPlugin.tools!(routingBgpPlugin.options.parse({}))).toEqual(['gobgpd', 'ip', 'iptables', 'sysctl', 'ipset']);
    expect(routingBgpPlugin.tools!(routingBgpPlugin.options.parse({ gobgpdBinary: '/opt/gobgp/gobgpd' }))[0]).toBe('/opt/gobgp/gobgpd');
    expect(routingBgpPlugin.tools!(routingBgpPlugin.options.parse({ manageGobgpd: false, gobgpApiSocket: '/run/gobgp.sock', enablePodEgress: false }))).toEqual([
      'ip',
      'iptables',
      'sysctl',
    ]);
  });
});
