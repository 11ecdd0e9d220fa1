/**
 * A BGP test cluster on one machine: an underlay namespace with a bridge, one namespace per node joined to it by a
 * veth, and a pod namespace behind each node. Every name starts with `tbgp<run>`; teardown removes all of it.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Node } from '@kubernetes/client-node';
import {
  routeSyncServiceKey,
  ServiceRegistry,
  SyncScheduler,
  type Controller,
  type PluginContext,
  type RouteSyncService,
} from '@kube-router/controller';
import { HealthRegistry } from '@kube-router/healthcheck';
import { createKubeContext, KubeServices, loadKubeConfig, type KubeContext } from '@kube-router/kube';
import { AgentMetrics } from '@kube-router/metrics';
import { ExecRunner, killNetnsProcesses } from '@kube-router/netfilter';
import { createRouteSyncPlugin, type RouteSyncOptions } from '@kube-router/route-sync';
import { KUBE_ROUTER_CNI_CONF_NAME, KUBE_ROUTER_CNI_CONFLIST, type ApiServer } from '@kube-router/testkit';
import pino from 'pino';
import { routingBgpPlugin, type RoutingBgpOptions } from '../plugin.js';

export const runner = new ExecRunner({ defaultTimeoutMs: 10_000 });

export async function sh(command: string, args: string[], netns?: string): Promise<string> {
  return (await runner.run({ command, args, ...(netns && { netns }) })).stdout;
}

export interface MeshNode {
  name: string;
  netns: string;
  podNetns: string;
  address: string;
  podCidr: string;
  podIp: string;
  /** The node's CNI file: kube-router's kubeadm conflist as its install-cni init container leaves it (no ranges). */
  cniConfFile: string;
  /** With `dualStack`: the node's IPv6 address, its IPv6 pod CIDR and the pod's IPv6 address. */
  address6?: string;
  podCidr6?: string;
  podIp6?: string;
}

export interface Mesh {
  prefix: string;
  dir: string;
  nodes: MeshNode[];
  teardown(): Promise<void>;
}

/** `tbgp` + 4 random letters: short enough for interface names. */
export function newPrefix(): string {
  return `tbgp${Math.random().toString(36).slice(2, 6)}`;
}

export async function createMesh(count: number, options: { dualStack?: boolean; prefix?: string } = {}): Promise<Mesh> {
  const prefix = options.prefix ?? newPrefix();
  const dir = await mkdtemp(join(tmpdir(), `${prefix}-`));
  const underlay = `${prefix}-ul`;
  const created: string[] = [];
  const teardown = async () => {
    for (const netns of created.reverse()) {
      // Processes left in a namespace (a gobgpd that outlived a failed test) would keep its veths alive.
      await killNetnsProcesses(runner, netns);
      await sh('ip', ['netns', 'delete', netns]).catch(() => undefined);
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const addNetns = async (name: string) => {
      await sh('ip', ['netns', 'add', name]);
      created.push(name);
      await sh('ip', ['link', 'set', 'lo', 'up'], name);
    };
    await addNetns(underlay);
    await sh('ip', ['link', 'add', 'br0', 'type', 'bridge'], underlay);
    await sh('ip', ['link', 'set', 'br0', 'up'], underlay);
    const nodes: MeshNode[] = [];
    for (let i = 0; i < count; i++) {
      const node: MeshNode = {
        name: `node-${i + 1}`,
        netns: `${prefix}-n${i + 1}`,
        podNetns: `${prefix}-p${i + 1}`,
        address: `10.77.0.${i + 1}`,
        podCidr: `10.78.${i + 1}.0/24`,
        podIp: `10.78.${i + 1}.2`,
        cniConfFile: join(dir, `node-${i + 1}-${KUBE_ROUTER_CNI_CONF_NAME}`),
        ...(options.dualStack && { address6: `fd00:77::${i + 1}`, podCidr6: `fd00:78:${i + 1}::/64`, podIp6: `fd00:78:${i + 1}::2` }),
      };
      await addNetns(node.netns);
      await addNetns(node.podNetns);
      await writeFile(node.cniConfFile, JSON.stringify(KUBE_ROUTER_CNI_CONFLIST));
      await sh('sysctl', ['-qw', 'net.ipv4.ip_forward=1'], node.netns);
      // Underlay: eth0 in the node, its peer on the bridge.
      await sh('ip', ['link', 'add', 'eth0', 'netns', node.netns, 'type', 'veth', 'peer', 'name', `n${i + 1}`, 'netns', underlay]);
      await sh('ip', ['link', 'set', `n${i + 1}`, 'master', 'br0', 'up'], underlay);
      await sh('ip', ['addr', 'add', `${node.address}/24`, 'dev', 'eth0'], node.netns);
      await sh('ip', ['link', 'set', 'eth0', 'up'], node.netns);
      // A pod behind the node, on the first address of the node's pod CIDR.
      const gateway = node.podCidr.replace(/\.0\/24$/, '.1');
      await sh('ip', ['link', 'add', 'pod0', 'netns', node.netns, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', node.podNetns]);
      await sh('ip', ['addr', 'add', `${gateway}/24`, 'dev', 'pod0'], node.netns);
      await sh('ip', ['link', 'set', 'pod0', 'up'], node.netns);
      await sh('ip', ['addr', 'add', `${node.podIp}/24`, 'dev', 'eth0'], node.podNetns);
      await sh('ip', ['link', 'set', 'eth0', 'up'], node.podNetns);
      await sh('ip', ['route', 'add', 'default', 'via', gateway], node.podNetns);
      if (node.address6) {
        await sh('sysctl', ['-qw', 'net.ipv6.conf.all.forwarding=1'], node.netns);
        // No duplicate address detection: the addresses are usable at once.
        for (const [netns, device, address] of [
          [node.netns, 'eth0', `${node.address6}/64`],
          [node.netns, 'pod0', `fd00:78:${i + 1}::1/64`],
          [node.podNetns, 'eth0', `${node.podIp6}/64`],
        ] as const) {
          await sh('ip', ['addr', 'add', address, 'dev', device, 'nodad'], netns);
        }
        await sh('ip', ['-6', 'route', 'add', 'default', 'via', `fd00:78:${i + 1}::1`], node.podNetns);
      }
      nodes.push(node);
    }
    return { prefix, dir, nodes, teardown };
  } catch (error) {
    await teardown();
    throw error;
  }
}

export function nodeObject(
  node: Pick<MeshNode, 'name' | 'address' | 'podCidr' | 'address6' | 'podCidr6'>,
  annotations: Record<string, string> = {},
): V1Node & { apiVersion: string; kind: string } {
  const podCidrs = [node.podCidr, ...(node.podCidr6 ? [node.podCidr6] : [])];
  const addresses = [node.address, ...(node.address6 ? [node.address6] : [])];
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: node.name, annotations },
    spec: { podCIDR: node.podCidr, podCIDRs: podCidrs },
    status: { addresses: addresses.map((address) => ({ type: 'InternalIP', address })) },
  };
}

export interface RoutingAgent {
  node: MeshNode;
  routing: Controller;
  routeSync: Controller;
  health: HealthRegistry;
  metrics: AgentMetrics;
  kube: KubeContext;
  apiSocket: string;
  /** route-sync's service: what routing-bgp handed over. */
  routes: RouteSyncService;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * One node's agent, assembled as the agent assembles it (route-sync first, then routing-bgp receiving its service),
 * with gobgpd and every kernel command in the node's namespace. The agent itself stays in the test's namespace and
 * reaches gobgpd over a Unix socket, which no network namespace separates.
 */
export function routingAgent(
  mesh: Mesh,
  node: MeshNode,
  kubeconfig: string,
  options: RoutingBgpOptions = {},
  /** route-sync's options over the fast ones tests use (the bench gives the agent's own). */
  routeSyncOverrides: Partial<RouteSyncOptions> = {},
): RoutingAgent {
  const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }).child({ node: node.name });
  const metrics = new AgentMetrics({ collectDefaultMetrics: false });
  const health = new HealthRegistry({ defaultGraceMs: 5_000 });
  const kube = createKubeContext({ kubeConfig: loadKubeConfig({ kubeconfig, env: {} }), nodeName: node.name, logger, metrics });
  const services = new ServiceRegistry();
  services.provide(KubeServices, kube);
  const context = (controller: string): PluginContext => ({
    nodeName: node.name,
    logger: logger.child({ controller }),
    metrics,
    health,
    services,
  });
  const routeSyncPlugin = createRouteSyncPlugin();
  const routeSync = routeSyncPlugin.create(
    context('route-sync'),
    // The agent gives both plugins the same --enable-ipv4 and --enable-ipv6.
    routeSyncPlugin.options.parse({
      netns: node.netns,
      syncPeriodMs: 5_000,
      minSyncIntervalMs: 0,
      ...(options.enableIpv4 !== undefined && { enableIpv4: options.enableIpv4 }),
      ...(options.enableIpv6 !== undefined && { enableIpv6: options.enableIpv6 }),
      ...routeSyncOverrides,
    }),
  ) as Controller;
  const apiSocket = join(mesh.dir, `${node.name}.sock`);
  const routing = routingBgpPlugin.create(
    context('routing-bgp'),
    routingBgpPlugin.options.parse({
      netns: node.netns,
      gobgpApiSocket: apiSocket,
      cniConfFile: node.cniConfFile,
      syncPeriodMs: 5_000,
      minSyncIntervalMs: 100,
      holdTimeSeconds: 9,
      enablePodEgress: false,
      ...options,
    }),
  ) as Controller;
  const schedulers = [new SyncScheduler(routeSync, { initialBackoffMs: 100 }), new SyncScheduler(routing, { initialBackoffMs: 200, maxBackoffMs: 1_000 })];
  const stopping = new AbortController();
  return {
    node,
    routing,
    routeSync,
    health,
    metrics,
    kube,
    apiSocket,
    routes: services.get(routeSyncServiceKey),
    async start() {
      for (const [i, controller] of [routeSync, routing].entries()) {
        const scheduler = schedulers[i]!;
        await controller.start({ requestSync: (reason) => scheduler.requestSync(reason), signal: stopping.signal });
      }
      await kube.informers.start({ cacheSyncTimeoutMs: 10_000 });
      for (const scheduler of schedulers) scheduler.start();
    },
    async stop() {
      stopping.abort();
      for (const scheduler of schedulers.reverse()) await scheduler.stop();
      await kube.informers.stop();
    },
  };
}

/** The kernel routes of route-sync's protocol in a namespace: destination -> gateway. */
export async function injectedRoutes(netns: string, family: '-4' | '-6' = '-4'): Promise<Map<string, string>> {
  const routes = JSON.parse(await sh('ip', ['-j', family, 'route', 'show', 'proto', '17'], netns)) as { dst: string; gateway?: string }[];
  return new Map(routes.map((r) => [r.dst, r.gateway ?? '']));
}

/** Connects over TCP from one namespace to an address; resolves `open`, `refused` or `timeout`. */
export async function tcpConnect(fromNetns: string, address: string, port: number, timeoutMs = 1_000): Promise<string> {
  const script = `const s=require('net').connect({port:${port},host:'${address}'});s.setTimeout(${timeoutMs});` +
    `s.on('connect',()=>{console.log('open');process.exit(0)});` +
    `s.on('error',e=>{console.log(e.code==='ECONNREFUSED'?'refused':e.code);process.exit(0)});` +
    `s.on('timeout',()=>{console.log('timeout');process.exit(0)})`;
  return (await sh(process.execPath, ['-e', script], fromNetns)).trim();
}

/** Starts a TCP listener in a pod namespace; the returned function ends it. */
export async function tcpListener(netns: string, port: number): Promise<() => void> {
  const { spawn } = await import('node:child_process');
  const child = spawn('ip', ['netns', 'exec', netns, process.execPath, '-e', `require('net').createServer(s=>s.end()).listen({port:${port},host:'::'},()=>console.log('ready'))`], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`listener in ${netns} exited with ${code}`)));
  });
  return () => child.kill('SIGKILL');
}


export type { ApiServer };
