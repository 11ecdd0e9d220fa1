// kubectl, a client written by others, against the embedded API server through a written kubeconfig.
import { execFile, spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiServer } from './index.js';
import { startApiServer } from './index.js';
import { eventually } from './apiserver/testing/http-client.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const hasKubectl = spawnSync('kubectl', ['version', '--client'], { timeout: 10_000 }).status === 0;
if (!hasKubectl) console.warn('kubectl.test.ts skipped: kubectl is not installed');

interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

let server: ApiServer;
let workDir: string;
let kubeconfig: string;
const children: ChildProcess[] = [];

function kubectlArgs(args: string[]): string[] {
  return ['--kubeconfig', kubeconfig, '--cache-dir', join(workDir, 'cache'), ...args];
}

function kubectl(...args: string[]): Promise<KubectlResult> {
  return new Promise((resolve) => {
    execFile('kubectl', kubectlArgs(args), { timeout: 20_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? ((error as { code?: unknown }).code as number) ?? 1 : 0, stdout, stderr });
    });
  });
}

async function kubectlOk(...args: string[]): Promise<string> {
  const result = await kubectl(...args);
  if (result.code !== 0) throw new Error(`kubectl ${args.join(' ')} failed (${result.code}): ${result.stderr}`);
  return result.stdout;
}

async function manifest(name: string, yaml: string): Promise<string> {
  const path = join(workDir, name);
  await writeFile(path, yaml);
  return path;
}

function appManifest(ns: string, options: { image: string; labels: string; servicePorts: string; policyPort: number }): string {
  return `apiVersion: v1
kind: Namespace
metadata:
  name: ${ns}
---
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: ${ns}
  labels: {${options.labels}}
spec:
  containers:
  - name: app
    image: ${options.image}
    ports: [{containerPort: 80, name: http}]
  - name: sidecar
    image: sidecar:1
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: ${ns}
spec:
  selector: {app: web}
  ports: [${options.servicePorts}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: allow-http
  namespace: ${ns}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  # The protocol is spelled out: the server defaults it, and kubectl apply replaces atomic lists that differ
  # from the applied ones, so without it every apply would report "configured" (as on a real cluster).
  - ports: [{port: ${options.policyPort}, protocol: TCP}]
`;
}

const describeWithKubectl = describe.skipIf(!hasKubectl);

beforeAll(async () => {
  if (!hasKubectl) return;
  workDir = await mkdtemp(join(tmpdir(), `krt-kubectl-${randomBytes(3).toString('hex')}-`));
  server = await startApiServer();
  kubeconfig = await server.writeKubeconfig(join(workDir, 'kubeconfig'));
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  await server?.close();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

describeWithKubectl('kubectl against the embedded API server', () => {
  it('discovers the served resources and the server version', async () => {
    const version = JSON.parse(await kubectlOk('version', '-o', 'json')) as Json;
    expect(version.serverVersion.minor).toBe('32');
    const resources = await kubectlOk('api-resources', '--no-headers');
    for (const line of [/^pods\s+po\s+v1\s+true\s+Pod$/m, /^services\s+svc\s+v1\s+true\s+Service$/m, /^networkpolicies\s+netpol\s+networking\.k8s\.io\/v1\s+true\s+NetworkPolicy$/m, /^nodes\s+no\s+v1\s+false\s+Node$/m]) {
      expect(resources).toMatch(line);
    }
  });

  it('applies manifests: creates first, then leaves them unchanged, then patches the changes in', async () => {
    const ns = 'kubectl-apply';
    const first = await manifest('app-v1.yaml', appManifest(ns, { image: 'app:1', labels: 'app: web, stage: dev', servicePorts: '{port: 80, targetPort: 8080}', policyPort: 80 }));
    const created = await kubectlOk('apply', '-f', first);
    expect(created).toContain(`namespace/${ns} created`);
    expect(created).toContain('pod/web created');
    expect(created).toContain('service/web created');
    expect(created).toContain('networkpolicy.networking.k8s.io/allow-http created');

    const again = await kubectlOk('apply', '-f', first);
    expect(again.trim().split('\n').every((line) => line.endsWith(' unchanged'))).toBe(true);

    const rvBefore = server.get('v1', 'Pod', ns, 'web')!.metadata.resourceVersion;
    const second = await manifest('app-v2.yaml', appManifest(ns, { image: 'app:2', labels: 'app: web, team: net', servicePorts: '{port: 80, targetPort: 8080}, {port: 443, targetPort: 8443, name: https}', policyPort: 8080 }));
    const configured = await kubectlOk('apply', '-f', second);
    expect(configured).toContain('pod/web configured');
    expect(configured).toContain('service/web configured');
    expect(configured).toContain('networkpolicy.networking.k8s.io/allow-http configured');
    expect(configured).toContain(`namespace/${ns} unchanged`);

    const pod = server.get('v1', 'Pod', ns, 'web')!;
    expect(pod.metadata.resourceVersion).not.toBe(rvBefore);
    expect(pod.metadata.labels).toEqual({ app: 'web', team: 'net' });
    const containers = (pod.spec as Json).containers;
    expect(containers.map((c: Json) => [c.name, c.image])).toEqual([['app', 'app:2'], ['sidecar', 'sidecar:1']]);
    expect(containers[0].ports).toEqual([{ containerPort: 80, name: 'http', protocol: 'TCP' }]);
    expect(pod.metadata.annotations?.['kubectl.kubernetes.io/last-applied-configuration']).toContain('app:2');

    const service = server.get('v1', 'Service', ns, 'web')!;
    expect((service.spec as Json).ports.map((p: Json) => p.port)).toEqual([80, 443]);
    expect((service.spec as Json).clusterIP).toMatch(/^10\./);
    const policy = server.get('networking.k8s.io/v1', 'NetworkPolicy', ns, 'allow-http')!;
    expect((policy.spec as Json).ingress).toEqual([{ ports: [{ port: 8080, protocol: 'TCP' }] }]);

    expect(await kubectlOk('apply', '-f', second)).not.toContain('configured');
  });

  it('gets tables, JSON and selections', async () => {
    const pods = await kubectlOk('get', 'pods', '-n', 'kubectl-apply', '-o', 'wide');
    expect(pods).toMatch(/^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+IP\s+NODE/);
    expect(pods).toMatch(/^web\s+0\/2\s+Pending\s+0\s+\d+s/m);
    const services = await kubectlOk('get', 'svc', '-A');
    expect(services).toMatch(/^kubectl-apply\s+web\s+ClusterIP\s+10\.\S+\s+<none>\s+80\/TCP,443\/TCP/m);
    expect(await kubectlOk('get', 'netpol', '-n', 'kubectl-apply')).toMatch(/^allow-http\s+app=web/m);
    expect(await kubectlOk('get', 'ns', 'default', 'kube-system', '--no-headers')).toMatch(/^default\s+Active/);

    const json = JSON.parse(await kubectlOk('get', 'pod', 'web', '-n', 'kubectl-apply', '-o', 'json')) as Json;
    expect(json.metadata.uid).toBe(server.get('v1', 'Pod', 'kubectl-apply', 'web')!.metadata.uid);

    expect(await kubectlOk('get', 'pods', '-A', '-l', 'team=net', '-o', 'name')).toBe('pod/web\n');
    expect(await kubectlOk('get', 'pods', '-A', '-l', 'team!=net', '-o', 'name')).toBe('');
    expect(await kubectlOk('get', 'pods', '-A', '--field-selector', 'metadata.name=web', '-o', 'name')).toBe('pod/web\n');
    const missing = await kubectl('get', 'pod', 'nope', '-n', 'kubectl-apply');
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain('pods "nope" not found');
  });

  it('labels and patches objects', async () => {
    expect(await kubectlOk('label', 'pod', 'web', '-n', 'kubectl-apply', 'tier=front')).toContain('pod/web labeled');
    expect(server.get('v1', 'Pod', 'kubectl-apply', 'web')!.metadata.labels?.tier).toBe('front');
    const clash = await kubectl('label', 'pod', 'web', '-n', 'kubectl-apply', 'tier=back');
    expect(clash.code).not.toBe(0);
    await kubectlOk('label', 'pod', 'web', '-n', 'kubectl-apply', 'tier=back', '--overwrite');
    expect(server.get('v1', 'Pod', 'kubectl-apply', 'web')!.metadata.labels?.tier).toBe('back');
    expect(await kubectlOk('label', 'pod', 'web', '-n', 'kubectl-apply', 'tier-')).toContain('pod/web unlabeled');
    expect(server.get('v1', 'Pod', 'kubectl-apply', 'web')!.metadata.labels?.tier).toBeUndefined();
    await kubectlOk('label', 'ns', 'kubectl-apply', 'owner=test');
    expect(server.get('v1', 'Namespace', undefined, 'kubectl-apply')!.metadata.labels).toMatchObject({ owner: 'test', 'kubernetes.io/metadata.name': 'kubectl-apply' });
    await kubectlOk('label', 'netpol', 'allow-http', '-n', 'kubectl-apply', 'reviewed=yes');

    await kubectlOk('patch', 'pod', 'web', '-n', 'kubectl-apply', '-p', '{"spec":{"containers":[{"name":"sidecar","image":"sidecar:2"}]}}');
    const containers = (server.get('v1', 'Pod', 'kubectl-apply', 'web')!.spec as Json).containers;
    expect(containers.map((c: Json) => c.image)).toEqual(['app:2', 'sidecar:2']);
    await kubectlOk('patch', 'svc', 'web', '-n', 'kubectl-apply', '--type', 'json', '-p', '[{"op":"replace","path":"/spec/selector","value":{"app":"other"}}]');
    expect((server.get('v1', 'Service', 'kubectl-apply', 'web')!.spec as Json).selector).toEqual({ app: 'other' });
    await kubectlOk('patch', 'svc', 'web', '-n', 'kubectl-apply', '--subresource', 'status', '--type', 'merge', '-p', '{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.1"}]}}}');
    expect(server.get('v1', 'Service', 'kubectl-apply', 'web')!.status).toEqual({ loadBalancer: { ingress: [{ ip: '192.0.2.1' }] } });
  });

  it('watches with get -w and prints changes as they happen', async () => {
    const ns = 'kubectl-watch';
    server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    server.create({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'first', namespace: ns }, spec: { containers: [{ name: 'c', image: 'c' }] } });
    const child = spawn('kubectl', kubectlArgs(['get', 'pods', '-n', ns, '-w', '--output-watch-events']), { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    try {
      await eventually(() => /first/.test(output) && server.openWatches('pods') === 1, 15_000);
      server.create({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'second', namespace: ns }, spec: { containers: [{ name: 'c', image: 'c' }] } });
      server.patchStatus('v1', 'Pod', ns, 'first', { status: { phase: 'Running' } });
      server.delete('v1', 'Pod', ns, 'second');
      await eventually(() => /DELETED\s+second/.test(output), 15_000);
      expect(output).toMatch(/ADDED\s+second\s+0\/1\s+Pending/);
      expect(output).toMatch(/MODIFIED\s+first\s+0\/1\s+Running/);
    } finally {
      child.kill('SIGTERM');
    }
  });

  it('deletes single objects of each kind', async () => {
    const ns = 'kubectl-delete';
    await kubectlOk('apply', '-f', await manifest('delete.yaml', appManifest(ns, { image: 'a:1', labels: 'app: web', servicePorts: '{port: 80}', policyPort: 80 })));
    expect(await kubectlOk('delete', 'pod', 'web', '-n', ns)).toContain('pod "web" deleted');
    expect(await kubectlOk('delete', 'svc', 'web', '-n', ns)).toContain('service "web" deleted');
    expect(await kubectlOk('delete', 'netpol', 'allow-http', '-n', ns)).toContain('networkpolicy.networking.k8s.io "allow-http" deleted');
    expect(await kubectlOk('delete', 'ns', ns)).toContain(`namespace "${ns}" deleted`);
    expect(server.get('v1', 'Namespace', undefined, ns)).toBeUndefined();
    const again = await kubectl('delete', 'pod', 'web', '-n', 'kubectl-apply', '--ignore-not-found');
    expect(again.code).toBe(0);
  });

  it('deletes everything with --all', async () => {
    const ns = 'kubectl-all';
    await kubectlOk('apply', '-f', await manifest('all.yaml', appManifest(ns, { image: 'a:1', labels: 'app: web', servicePorts: '{port: 80}', policyPort: 80 })));
    for (const name of ['extra-1', 'extra-2']) await kubectlOk('run', name, '-n', ns, '--image', 'busybox');
    expect(server.list('v1', 'Pod', ns)).toHaveLength(3);
    const pods = await kubectlOk('delete', 'pods', '--all', '-n', ns);
    expect(pods.trim().split('\n')).toHaveLength(3);
    expect(server.list('v1', 'Pod', ns)).toEqual([]);
    await kubectlOk('delete', 'services,networkpolicies', '--all', '-n', ns);
    expect(server.list('v1', 'Service', ns)).toEqual([]);
    expect(server.list('networking.k8s.io/v1', 'NetworkPolicy', ns)).toEqual([]);
    expect(await kubectlOk('get', 'all', '-n', ns)).toBe('');

    // As on a real cluster, the system namespaces refuse deletion while the rest go.
    const namespaces = await kubectl('delete', 'namespaces', '--all');
    expect(namespaces.stdout).toContain(`namespace "${ns}" deleted`);
    expect(namespaces.stderr).toContain('namespaces "default" is forbidden: this namespace may not be deleted');
    expect(server.list('v1', 'Namespace').map((n) => n.metadata.name)).toEqual(['default', 'kube-public', 'kube-system']);
  });
});
