import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '@kube-router/testkit';

async function get(url: string): Promise<{ status: number; body: string }> {
  const response = await fetch(url);
  return { status: response.status, body: await response.text() };
}

const run = promisify(execFile);

/** A TCP connect from inside a network namespace, by a process of its own, as any client in the pod would. */
async function canConnect(netns: string, ip: string, port: number): Promise<boolean> {
  const script = `const s = require('net').connect(${port}, '${ip}'); s.setTimeout(700);
    s.on('connect', () => process.exit(0)); s.on('timeout', () => process.exit(1)); s.on('error', () => process.exit(1));`;
  try {
    await run('ip', ['netns', 'exec', netns, process.execPath, '-e', script], { timeout: 5_000 });
    return true;
  } catch {
    return false;
  }
}

async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
const isRoot = process.getuid?.() === 0;

/**
 * `npm start` for real: the lab script is spawned as a person would run it, and its three printed lines are all the
 * test knows. kubectl (a client this project did not write) then reads the embedded cluster through the printed
 * KUBECONFIG.
 */
describe.skipIf(!isRoot)('the lab behind npm start (needs root for network namespaces)', () => {
  let child: ChildProcess;
  let lines: string[] = [];
  let kubeconfig = '';
  let healthUrl = '';
  let metricsUrl = '';
  const kubectl = async (...args: string[]) => (await run('kubectl', ['--kubeconfig', kubeconfig, ...args])).stdout;
  const kubectlApply = (manifest: string) =>
    new Promise<void>((resolve, reject) => {
      const apply = execFile('kubectl', ['--kubeconfig', kubeconfig, 'apply', '-f', '-'], (error) => (error ? reject(error) : resolve()));
      apply.stdin!.end(manifest);
    });

  beforeAll(async () => {
    const [healthPort, metricsPort] = [await freePort(), await freePort()];
    // One process (no npx or tsx wrapper in between), so that the signal and the exit code are the lab's own.
    child = spawn(process.execPath, ['--conditions=@kube-router/source', '--import', 'tsx', 'src/lab.ts', `--health-port=${healthPort}`, `--metrics-port=${metricsPort}`], {
      cwd: new URL('..', import.meta.url).pathname,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const reader = createInterface({ input: child.stdout! });
    lines = [];
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`lab printed no URLs in time; got ${JSON.stringify(lines)}`)), 45_000);
      reader.on('line', (line) => {
        if (line.startsWith('{')) return;
        lines.push(line);
        if (lines.length === 3) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => reject(new Error(`lab exited with ${code} before printing its URLs`)));
    });
    [kubeconfig, healthUrl, metricsUrl] = [lines[0]!.replace(/^KUBECONFIG=/, ''), lines[1]!, lines[2]!];
  }, 60_000);

  afterAll(async () => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });

  it('prints KUBECONFIG=<path>, the health URL and the metrics URL, one line each', () => {
    expect(lines[0]).toMatch(/^KUBECONFIG=\/.+\/kubeconfig$/);
    expect(healthUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/healthz$/);
    expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
  });

  it('runs the seeded pods in network namespaces on the lab node', async () => {
    const pods = JSON.parse(await kubectl('get', 'pods', '-A', '-o', 'json')) as {
      items: { metadata: { name: string; annotations?: Record<string, string> }; status: { phase: string; podIP?: string } }[];
    };
    expect(pods.items.map((p) => p.metadata.name).sort()).toEqual(['client', 'intruder', 'web']);
    for (const pod of pods.items) {
      expect(pod.status.phase).toBe('Running');
      expect(pod.status.podIP).toMatch(/^10\.244\.0\.\d+$/);
      expect(pod.metadata.annotations?.['lab.kube-router.io/netns']).toMatch(/^krt-/);
    }
  });

  it('gives the LoadBalancer Service an address from the lab range, in both families', async () => {
    let ips = '';
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      ips = await kubectl('get', 'service', 'web', '-n', 'demo', '-o', 'jsonpath={.status.loadBalancer.ingress[*].ip}');
      if (ips.split(' ').length === 2) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(ips.split(' ').sort()).toEqual(['10.255.0.0', 'fd00:255::']);
    await kubectlApply(`apiVersion: v1
kind: Service
metadata: { name: late, namespace: demo }
spec: { type: LoadBalancer, ports: [{ port: 443, protocol: TCP }] }
`);
    let late = '';
    while (Date.now() < deadline + 10_000 && late === '') {
      late = await kubectl('get', 'service', 'late', '-n', 'demo', '-o', 'jsonpath={.status.loadBalancer.ingress[*].ip}');
      if (late === '') await new Promise((r) => setTimeout(r, 200));
    }
    expect(late).toMatch(/^10\.255\.0\.\d+/);
  });

  it('answers health, readiness and metrics', async () => {
    expect((await get(healthUrl)).status).toBe(200);
    const ready = await get(healthUrl.replace(/healthz$/, 'readyz?verbose'));
    expect(ready.body).toContain('[+]informers ok');
    expect(ready.body).toContain('[+]lballoc ok');
    expect(ready.body).toMatch(/\[\+\]netpol\S* ok/);
    const metrics = (await get(metricsUrl)).body;
    expect(metrics).toMatch(/kube_router_controller_sync_last_success\{controller="lballoc"\} [1-9]\d+/);
    expect(metrics).toContain('kube_router_informer_watch_healthy{resource="services"} 1');
  });

  it('enforces a NetworkPolicy applied with kubectl on the lab pods, and lifts it when deleted', async () => {
    const pods = JSON.parse(await kubectl('get', 'pods', '-A', '-o', 'json')) as {
      items: { metadata: { name: string; annotations: Record<string, string> }; status: { podIP: string } }[];
    };
    const pod = (name: string) => pods.items.find((p) => p.metadata.name === name)!;
    const netnsOf = (name: string) => pod(name).metadata.annotations['lab.kube-router.io/netns']!;
    const webIP = pod('web').status.podIP;
    const reach = (from: string) => canConnect(netnsOf(from), webIP, 80);
    expect(await reach('intruder')).toBe(true);
    expect(await reach('client')).toBe(true);

    await kubectlApply(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: { name: web-from-client, namespace: demo }
spec:
  podSelector: { matchLabels: { app: web } }
  ingress:
    - from: [{ podSelector: { matchLabels: { app: client } } }]
      ports: [{ port: 80, protocol: TCP }]
`);
    await eventually('the intruder to be cut off', async () => !(await reach('intruder')));
    expect(await reach('client')).toBe(true);

    await kubectl('delete', 'networkpolicy', 'web-from-client', '-n', 'demo');
    await eventually('the intruder to reach web again', () => reach('intruder'));
  }, 40_000);

  it('stops on SIGTERM with exit code 0 and leaves no network namespace behind', async () => {
    const netns = (await kubectl('get', 'pod', 'web', '-n', 'demo', '-o', 'jsonpath={.metadata.annotations.lab\\.kube-router\\.io/netns}')).trim();
    const runId = netns.split('-')[1];
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    const { stdout } = await run('ip', ['netns', 'list']);
    expect(stdout.split('\n').filter((line) => line.startsWith(`krt-${runId}-`))).toEqual([]);
  }, 30_000);
});
