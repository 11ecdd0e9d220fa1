import { spawn } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, get, hasTool, waitFor } from './testing/support.js';

const repo = fileURLToPath(new URL('../../../', import.meta.url));
const root = process.getuid?.() === 0;
// As root the lab would build network namespaces of its own on a machine other tests share: run npm as nobody, for
// whom the lab runs the agent without a dataplane. The flags' path from `npm start --` to the agent is the same.
const missing = root && !hasTool('setpriv') ? 'needs setpriv (util-linux) to run npm as nobody' : undefined;

describe.skipIf(missing !== undefined)(`npm start -- <flags>${missing ? ` (skipped: ${missing})` : ''}`, { timeout: 120_000 }, () => {
  let home = '';
  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), 'tagd-npm-'));
    await chmod(home, 0o777);
  });
  afterAll(async () => {
    await rm(home, { recursive: true, force: true });
  });

  // Before: the root script's inner `npm run` took the flags as its own config, and the agent served on 20244.
  it("hands the flags to the lab's agent: it serves health on the port given", async () => {
    const [healthPort, metricsPort] = [await freePort(), await freePort()];
    const npm = ['npm', 'start', '--', '--health-addr=127.0.0.1', `--health-port=${healthPort}`, `--metrics-port=${metricsPort}`];
    const command = root ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', ...npm] : npm;
    const child = spawn(command[0]!, command.slice(1), {
      cwd: repo,
      env: { ...process.env, HOME: home, npm_config_cache: join(home, 'cache'), npm_config_update_notifier: 'false' },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group: the Ctrl-C below reaches npm, its shell and the lab, as a terminal's would.
      detached: true,
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await waitFor('the lab to print its health URL', () => stdout.includes(`http://127.0.0.1:${healthPort}/healthz`), 60_000);
      expect((await get(`http://127.0.0.1:${healthPort}/healthz`)).status).toBe(200);
      expect((await get(`http://127.0.0.1:${metricsPort}/metrics`)).body).toContain('kube_router_build_info');
    } finally {
      process.kill(-child.pid!, 'SIGINT');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 15_000))]);
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, 'SIGKILL');
    }
  });
});
