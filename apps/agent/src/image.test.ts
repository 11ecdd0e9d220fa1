// Issue 30: the agent's image (`npm run image`, deploy/build-image.mjs), run by podman in a lab node as kube-router's
// kubeadm-kuberouter-all-features DaemonSet runs it: its args, env and mounts, the node's network namespace standing in
// for hostNetwork. Two lab nodes, one container each, so that the image's gobgpd has a BGP session to peer with.
//
// This kernel may have no IPVS (no /proc/net/ip_vs, no module to load): the proxy runs as the manifest says and its
// readiness check must name the missing IPVS, every other check must be ok. The proxy itself is tested on a real IPVS
// kernel in the QEMU guest tier (packages/proxy-ipvs); here the point is the image, and its ipvsadm is what answers.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createLabUnderlay,
  DEFAULT_CNI_PATH,
  defaultClusterNodes,
  labSkipReason,
  loadManifestFiles,
  writeKubeadmNodeFiles,
  type KubeadmNodeFiles,
  startApiServer,
  startLabCluster,
  type ApiServer,
  type LabCluster,
  type LabPod,
  type LabUnderlay,
} from '@kube-router/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasTool, waitFor } from './testing/support.js';

const repo = fileURLToPath(new URL('../../../', import.meta.url));
// From kube-router's daemonset/kubeadm-kuberouter-all-features.yaml.
const MANIFEST_ARGS = [
  '--run-router=true',
  '--run-firewall=true',
  '--run-service-proxy=true',
  '--bgp-graceful-restart=true',
  '--kubeconfig=/var/lib/kube-router/kubeconfig',
];
const HEALTH_PORT = 20244;
const hasIpvs = existsSync('/proc/net/ip_vs');
// crun refuses a host whose cgroup v2 hierarchy is mounted beside v1 controllers ("hybrid"); runc runs there.
const unifiedCgroups = existsSync('/sys/fs/cgroup/cgroup.controllers');

function skipReason(): string | undefined {
  const lab = labSkipReason('podman', 'buildah', 'mmdebstrap');
  if (lab) return lab;
  if (!['bridge', 'host-local'].every((plugin) => existsSync(join(DEFAULT_CNI_PATH, plugin)))) {
    return `no CNI plugins in ${DEFAULT_CNI_PATH} (apt-get install containernetworking-plugins)`;
  }
  if (!unifiedCgroups && !hasTool('runc')) return 'cgroups v1/hybrid host, where crun does not run containers: needs runc (apt-get install runc)';
  return undefined;
}
const skip = skipReason();

/**
 * podman's own rlimits for a container (RLIMIT_NOFILE 1048576, RLIMIT_NPROC kernel.pid_max) are raised above the
 * caller's unless the caller may (CAP_SYS_RESOURCE, which a sandboxed root can lack): the runtime then refuses to start.
 * The kubelet's containers get the runtime's limits too; these are what podman's conmon has, never more.
 */
function ulimitFlags(): string[] {
  const limits = readFileSync('/proc/self/limits', 'utf8');
  const hard = (name: string) => {
    const value = new RegExp(`^${name}\\s+\\S+\\s+(\\S+)`, 'm').exec(limits)?.[1];
    return value === undefined || value === 'unlimited' ? Number.POSITIVE_INFINITY : Number(value);
  };
  const pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'));
  const nofile = Math.min(hard('Max open files'), 1_048_576);
  const nproc = Math.min(hard('Max processes'), pidMax);
  return [`--ulimit=nofile=${nofile}:${nofile}`, `--ulimit=nproc=${nproc}:${nproc}`];
}

interface Check {
  name: string;
  ok: boolean;
  text: string;
}

/** The checks of a Kubernetes-style verbose answer: `[+]name ok`, `[-]name failed: reason`. */
function checksOf(body: string): Check[] {
  return body.split('\n').flatMap((line) => {
    const match = /^\[([+-])\](\S+) (.*)$/.exec(line);
    return match ? [{ ok: match[1] === '+', name: match[2]!, text: match[3]! }] : [];
  });
}

/** Runs a command with no stdin (podman exits without reading it) and a deadline; never throws on exit codes. */
function command(file: string, args: readonly string[], timeoutMs = 60_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs, killSignal: 'SIGKILL' });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', (error) => reject(new Error(`${file} ${args.join(' ')}: ${error.message}`)));
    child.once('close', (code, signal) => resolve({ code: code ?? (signal ? null : 0), stdout, stderr }));
  });
}

const podman = (args: readonly string[], timeoutMs?: number) => command('podman', args, timeoutMs);

/** The running build, ended with the test should the test end first. */
let builder: ChildProcess | undefined;

/** `npm run image`: builds what is not built yet, prints the image reference last. */
function buildImage(): Promise<string> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, ['deploy/build-image.mjs'], { cwd: repo, stdio: ['ignore', 'pipe', 'pipe'] });
    builder = child;
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => {
      const image = stdout.trim().split('\n').at(-1) ?? '';
      if (code !== 0 || !image) reject(new Error(`npm run image exited with ${code}:\n${stderr.slice(-4000)}`));
      else {
        console.info(`image ${image} ready in ${((performance.now() - started) / 1000).toFixed(0)} s`);
        resolve(image);
      }
    });
  });
}

describe.skipIf(skip !== undefined)(`the agent image in lab nodes, as kubeadm-kuberouter-all-features runs it${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const runId = `im${randomBytes(2).toString('hex')}`;
  // A subnet of its own: `npm start` is on 10.250.0.0/24, the testkit's cluster test on 100-249.
  const subnet = randomInt(20, 100);
  const containers: string[] = [];
  let workdir = '';
  let image = '';
  let underlay: LabUnderlay | undefined;
  let server: ApiServer | undefined;
  let cluster: LabCluster | undefined;
  let pods: LabPod[] = [];
  const files = new Map<string, KubeadmNodeFiles>();
  const specs = defaultClusterNodes(2);

  beforeAll(async () => {
    image = await buildImage();
    workdir = await mkdtemp(join(tmpdir(), 'tagd-image-'));
    underlay = await createLabUnderlay({ runId, cidrs: [`10.250.${subnet}.0/24`, `fd00:10:250:${subnet.toString(16)}::/64`] });
    // RBAC on, seeded with deploy/rbac.yaml: the agents run as the DaemonSets' ServiceAccount under exactly that role.
    const rbacSeed = await loadManifestFiles([join(repo, 'deploy/rbac.yaml')]);
    server = await startApiServer({ host: underlay.hostIps[0]!, tls: true, tokens: [randomBytes(24).toString('hex')], rbac: true, seed: rbacSeed });
    // Each node's files as kubeadm and kube-router's install-cni leave them, the agent's token its ServiceAccount's.
    for (const spec of specs) files.set(spec.name, await writeKubeadmNodeFiles(server, join(workdir, spec.name)));
    cluster = await startLabCluster({
      apiServer: server,
      underlay,
      runId,
      podTimeoutMs: 120_000,
      nodes: specs.map((spec) => ({ ...spec, cniConfFile: files.get(spec.name)!.cniConfFile })),
    });
    // A pod per node, bound before the agents start: host-local has no ranges until the agent writes them.
    const podsRunning = Promise.all(cluster.nodes.map((node, index) => node.addPod({ name: `web-${index + 1}`, ports: [{ port: 8080 }] })));
    podsRunning.catch(() => undefined);
    // hostPath /lib/modules (ro), as the manifest mounts it; a host without it gets an empty directory in its place.
    const modules = existsSync('/lib/modules') ? '/lib/modules' : join(workdir, 'lib-modules');
    await mkdir(modules, { recursive: true });
    // hostPath /run/xtables.lock, type FileOrCreate: shared with every iptables user on the host, as on a node.
    if (!existsSync('/run/xtables.lock')) writeFileSync('/run/xtables.lock', '');
    for (const node of cluster.nodes) {
      const nodeFiles = files.get(node.nodeName)!;
      const name = `${cluster.prefix}agent-${node.nodeName}`;
      containers.push(name);
      const started = await podman([
        'run',
        '--detach',
        `--name=${name}`,
        ...(unifiedCgroups ? [] : ['--runtime=runc']),
        ...ulimitFlags(),
        '--privileged',
        `--network=ns:/run/netns/${node.nodeNetns}`,
        `--volume=${modules}:/lib/modules:ro`,
        '--volume=/run/xtables.lock:/run/xtables.lock',
        ...nodeFiles.mounts.map((mount) => `--volume=${mount.source}:${mount.target}${mount.readOnly ? ':ro' : ''}`),
        `--env=NODE_NAME=${node.nodeName}`,
        `--env=POD_NAME=kube-router-${node.nodeName}`,
        `--env=KUBE_ROUTER_CNI_CONF_FILE=${nodeFiles.containerCniConfFile}`,
        image,
        ...MANIFEST_ARGS,
      ]);
      expect(started.code, started.stderr).toBe(0);
    }
    pods = await podsRunning;
  }, 15 * 60_000);

  afterAll(async () => {
    if (builder && builder.exitCode === null) builder.kill('SIGKILL');
    for (const name of containers) await podman(['rm', '--force', '--time=5', name]).catch(() => undefined);
    await cluster?.stop().catch((error: unknown) => console.error(error));
    await underlay?.remove().catch((error: unknown) => console.error(error));
    await server?.close();
    if (workdir) await rm(workdir, { recursive: true, force: true });
  }, 120_000);

  const logsOf = async (container: string) => {
    const logs = await podman(['logs', '--tail=40', container]).catch((error: unknown) => ({ stdout: '', stderr: String(error) }));
    return `${logs.stdout}${logs.stderr}`;
  };

  it('is ready in every check but the proxy\'s kernel check, which names the missing IPVS', { timeout: 180_000 }, async () => {
    // Without IPVS the proxy's kernel check fails, and only it: the proxy's sync has run (its controller check).
    const expectedFailing = hasIpvs ? [] : ['proxy/kernel'];
    const settled = (checks: Check[]) => checks.length > 0 && checks.every((check) => check.ok !== expectedFailing.includes(check.name));
    for (const [index, node] of cluster!.nodes.entries()) {
      const url = `http://${node.nodeIps[0]}:${HEALTH_PORT}/readyz?verbose`;
      let body = '';
      await waitFor(
        `${node.nodeName}'s agent (container ${containers[index]}) to be ready but for IPVS`,
        async () => {
          body = await fetch(url, { signal: AbortSignal.timeout(3_000) })
            .then((response) => response.text())
            .catch((error: unknown) => String(error));
          return settled(checksOf(body));
        },
        150_000,
      ).catch(async (error: unknown) => {
        throw new Error(`${String(error)}\nlast /readyz?verbose:\n${body}\nlogs:\n${await logsOf(containers[index]!)}`);
      });
      console.info(`${node.nodeName} /readyz?verbose:\n${body.trim()}`);
      const checks = checksOf(body);
      // Every plugin of the manifest's features, each with its sync and its tools checks.
      for (const name of ['informers', 'netpol', 'netpol/tools', 'proxy', 'proxy/tools', 'route-sync', 'route-sync/tools', 'routing-bgp', 'routing-bgp/tools']) {
        expect(checks.find((check) => check.name === name), `${name} ok in\n${body}`).toMatchObject({ ok: true });
      }
      expect(checks.filter((check) => !check.ok).map((check) => check.name)).toEqual(expectedFailing);
      if (!hasIpvs) expect(checks.find((check) => check.name === 'proxy/kernel')?.text).toMatch(/IPVS/);
    }
  });

  it("runs gobgpd inside the container, with an established session to the other node and its pod CIDR in the node's routes", { timeout: 120_000 }, async () => {
    for (const [index, node] of cluster!.nodes.entries()) {
      const other = cluster!.nodes[1 - index]!;
      const processes = await podman(['exec', containers[index]!, 'pgrep', '-x', 'gobgpd']);
      expect(processes.code, `no gobgpd in ${containers[index]}: ${processes.stderr}`).toBe(0);
      let neighbors = '';
      await waitFor(
        `${node.nodeName}'s BGP session with ${other.nodeName}`,
        async () => {
          neighbors = (await podman(['exec', containers[index]!, 'gobgp', 'neighbor'])).stdout;
          return neighbors.split('\n').some((line) => line.includes(other.nodeIps[0]!) && /Establ/.test(line));
        },
        60_000,
      ).catch((error: unknown) => {
        throw new Error(`${String(error)}\n${neighbors}`);
      });
      let routes = '';
      await waitFor(
        `${node.nodeName}'s route to ${other.nodeName}'s pod CIDR`,
        async () => {
          routes = (await command('ip', ['netns', 'exec', node.nodeNetns, 'ip', 'route', 'show', other.podCidrs[0]!])).stdout;
          return routes.includes(`via ${other.nodeIps[0]}`);
        },
        60_000,
      ).catch((error: unknown) => {
        throw new Error(`${String(error)}\n${routes}`);
      });
    }
  });

  it('writes the node\'s pod CIDRs into the mounted CNI file; the kubelet attaches the pods with them; they reach each other', { timeout: 60_000 }, async () => {
    for (const [index, node] of cluster!.nodes.entries()) {
      const conflist = JSON.parse(await readFile(files.get(node.nodeName)!.cniConfFile, 'utf8')) as {
        plugins: Array<{ ipam?: { ranges?: Array<Array<{ subnet: string }>> } }>;
      };
      const subnets = (conflist.plugins[0]?.ipam?.ranges ?? []).flat().map((range) => range.subnet);
      expect(subnets).toEqual(expect.arrayContaining([...node.podCidrs]));
      const pod = pods[index]!;
      expect(pod.ipv4, JSON.stringify(pod)).toBeDefined();
      expect(pod.ipv4!.startsWith(node.podCidrs[0]!.split('.').slice(0, 3).join('.') + '.')).toBe(true);
    }
    // Across the nodes: the route the image's gobgpd learned carries pod traffic.
    expect(await cluster!.nodes[0]!.probe({ namespace: 'default', name: 'web-1' }, pods[1]!.ipv4!, 8080)).toBe(true);
    expect(await cluster!.nodes[1]!.probe({ namespace: 'default', name: 'web-2' }, pods[0]!.ipv4!, 8080)).toBe(true);
  });

  it('stops on SIGTERM with exit code 0 and leaves no process in the node', { timeout: 120_000 }, async () => {
    for (const [index, node] of cluster!.nodes.entries()) {
      const container = containers[index]!;
      const stopped = await podman(['stop', '--time=30', container], 60_000);
      expect(stopped.code, stopped.stderr).toBe(0);
      const exitCode = (await podman(['inspect', '--format={{.State.ExitCode}}', container])).stdout.trim();
      expect(exitCode, await logsOf(container)).toBe('0');
      const pids = (await command('ip', ['netns', 'pids', node.nodeNetns])).stdout.split('\n').filter(Boolean);
      const commands = pids.flatMap((pid) => {
        try {
          return [readFileSync(`/proc/${pid}/comm`, 'utf8').trim()];
        } catch {
          return []; // gone since it was listed
        }
      });
      expect(commands).not.toContain('gobgpd');
      expect(commands).not.toContain('node');
    }
  });
});
