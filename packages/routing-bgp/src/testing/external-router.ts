/**
 * An external router for the mesh of ./mesh.ts: a network namespace on the mesh's underlay (or one hop behind a
 * gateway on it) with its own gobgpd, configured over its API as an operator would configure the router. Every name
 * starts with `bp` + 4 random letters; `teardown` removes all of it.
 */
import { join } from 'node:path';
import pino from 'pino';
import { GobgpClient, type ApiPath, type PeerConfig } from '../gobgp-api.js';
import { GobgpdSupervisor } from '../gobgpd.js';
import { pathPrefix, podCidrPath } from '../paths.js';
import { sh, type Mesh } from './mesh.js';

export interface ExternalRouter {
  netns: string;
  address: string;
  api: GobgpClient;
  supervisor: GobgpdSupervisor;
  /** The router's unicast IPv4 paths, withdrawn ones left out. */
  paths(): Promise<ApiPath[]>;
  /** The prefixes the router learned from `neighbor`. */
  learnedFrom(neighbor: string): Promise<string[]>;
  sessionState(neighbor: string): Promise<string | undefined>;
  teardown(): Promise<void>;
}

export interface ExternalRouterOptions {
  /** 1-54: the router's address is 10.77.0.<100+n> on the underlay, or 10.88.<n>.2 behind a gateway with `behindGateway`. */
  index: number;
  asn: number;
  listenPort: number;
  /** Puts the router one IP hop away from the nodes: a gateway 10.77.0.<200+index> routes to 10.88.<index>.0/24. */
  behindGateway?: boolean;
  /** Prefixes the router announces, next hop itself. */
  announce?: readonly string[];
  /** Neighbors, as the router's own peer configuration. */
  neighbors?: readonly PeerConfig[];
  /** Graceful restart (helper) on the router's sessions: it keeps a restarting node's routes. */
  gracefulRestartSeconds?: number;
}

/** `bp` + 4 random letters: the prefix of everything a test of this package creates besides the mesh. */
export function routerPrefix(): string {
  return `bp${Math.random().toString(36).slice(2, 6)}`;
}

export interface RouterNamespace {
  netns: string;
  /** The router's address: 10.77.0.<100+index> on the underlay, or 10.88.<index>.2 behind its gateway. */
  address: string;
  teardown(): Promise<void>;
}

/**
 * A namespace for an external router on the mesh's underlay, or with `behindGateway` one IP hop away: a gateway
 * 10.77.0.<200+index> on the underlay routes to 10.88.<index>.0/24 (every node gets the route to it).
 */
export async function routerNamespace(mesh: Mesh, prefix: string, options: { index: number; behindGateway?: boolean }): Promise<RouterNamespace> {
  const underlay = `${mesh.prefix}-ul`;
  const netns = `${prefix}-r${options.index}`;
  const gateway = `${prefix}-g${options.index}`;
  const created: string[] = [];
  const teardown = async () => {
    for (const name of created.reverse()) await sh('ip', ['netns', 'delete', name]).catch(() => undefined);
  };
  try {
    const addNetns = async (name: string) => {
      await sh('ip', ['netns', 'add', name]);
      created.push(name);
      await sh('ip', ['link', 'set', 'lo', 'up'], name);
    };
    await addNetns(netns);
    if (!options.behindGateway) {
      await sh('ip', ['link', 'add', 'eth0', 'netns', netns, 'type', 'veth', 'peer', 'name', `${prefix}r${options.index}`, 'netns', underlay]);
      await sh('ip', ['link', 'set', `${prefix}r${options.index}`, 'master', 'br0', 'up'], underlay);
      const address = `10.77.0.${100 + options.index}`;
      await sh('ip', ['addr', 'add', `${address}/24`, 'dev', 'eth0'], netns);
      await sh('ip', ['link', 'set', 'eth0', 'up'], netns);
      return { netns, address, teardown };
    }
    await addNetns(gateway);
    await sh('sysctl', ['-qw', 'net.ipv4.ip_forward=1'], gateway);
    await sh('ip', ['link', 'add', 'eth0', 'netns', gateway, 'type', 'veth', 'peer', 'name', `${prefix}g${options.index}`, 'netns', underlay]);
    await sh('ip', ['link', 'set', `${prefix}g${options.index}`, 'master', 'br0', 'up'], underlay);
    await sh('ip', ['addr', 'add', `10.77.0.${200 + options.index}/24`, 'dev', 'eth0'], gateway);
    await sh('ip', ['link', 'set', 'eth0', 'up'], gateway);
    await sh('ip', ['link', 'add', 'eth1', 'netns', gateway, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns]);
    await sh('ip', ['addr', 'add', `10.88.${options.index}.1/24`, 'dev', 'eth1'], gateway);
    await sh('ip', ['link', 'set', 'eth1', 'up'], gateway);
    const address = `10.88.${options.index}.2`;
    await sh('ip', ['addr', 'add', `${address}/24`, 'dev', 'eth0'], netns);
    await sh('ip', ['link', 'set', 'eth0', 'up'], netns);
    await sh('ip', ['route', 'add', 'default', 'via', `10.88.${options.index}.1`], netns);
    for (const node of mesh.nodes) {
      await sh('ip', ['route', 'add', `10.88.${options.index}.0/24`, 'via', `10.77.0.${200 + options.index}`], node.netns);
    }
    return { netns, address, teardown };
  } catch (error) {
    await teardown();
    throw error;
  }
}

export async function startExternalRouter(mesh: Mesh, prefix: string, options: ExternalRouterOptions): Promise<ExternalRouter> {
  const { netns, address, teardown: removeNamespaces } = await routerNamespace(mesh, prefix, options);
  let supervisor: GobgpdSupervisor | undefined;
  let api: GobgpClient | undefined;
  const teardown = async () => {
    api?.close();
    await supervisor?.stop({ signal: 'SIGKILL' }).catch(() => undefined);
    await removeNamespaces();
  };
  try {
    const socket = join(mesh.dir, `${netns}.sock`);
    supervisor = new GobgpdSupervisor({ netns, apiHosts: [`unix://${socket}`], logger: pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }) });
    await supervisor.start();
    api = new GobgpClient({ target: `unix://${socket}` });
    await api.waitReady(10_000);
    await api.startBgp({
      asn: options.asn,
      routerId: address,
      listenPort: options.listenPort,
      ...(options.gracefulRestartSeconds && { gracefulRestart: { restartTimeSeconds: options.gracefulRestartSeconds, deferralTimeSeconds: 10 } }),
    });
    for (const prefixToAnnounce of options.announce ?? []) await api.addPath(podCidrPath(prefixToAnnounce, address));
    for (const neighbor of options.neighbors ?? []) await api.addPeer(neighbor);
    const router: ExternalRouter = {
      netns,
      address,
      api,
      supervisor,
      paths: async () => (await api!.listGlobalPaths('AFI_IP')).filter((p) => !p.isWithdraw),
      learnedFrom: async (neighbor) =>
        (await router.paths()).filter((p) => p.neighborIp === neighbor).flatMap((p) => pathPrefix(p) ?? []),
      sessionState: async (neighbor) =>
        (await api!.listPeers()).find((p) => p.conf?.neighborAddress === neighbor)?.state?.sessionState,
      teardown,
    };
    return router;
  } catch (error) {
    await teardown();
    throw error;
  }
}

/** SIGKILLs the gobgpd running in a node's namespace, as a crash would (no Cease, the TCP sessions just close). */
export async function killGobgpd(netns: string): Promise<number> {
  const pids = (await sh('ip', ['netns', 'pids', netns])).split('\n').filter(Boolean);
  const gobgpd: number[] = [];
  for (const pid of pids) if ((await sh('cat', [`/proc/${pid}/comm`]).catch(() => '')).trim() === 'gobgpd') gobgpd.push(Number(pid));
  if (gobgpd.length !== 1) throw new Error(`expected one gobgpd in ${netns}, found ${gobgpd.length}`);
  process.kill(gobgpd[0]!, 'SIGKILL');
  return gobgpd[0]!;
}
