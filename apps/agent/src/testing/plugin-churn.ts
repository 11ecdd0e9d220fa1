/**
 * Churn for every plugin but netpol (whose churn is ScaleWorld's), shared by the plugins' leak test
 * (memory-leak.plugins.test.ts) and the agent's plugins bench (bench/plugins-heap.ts). Each names how the measured
 * agent runs the plugin, seeds its objects, and makes rounds of churn at a constant size, each ending once its last
 * change is in the kernel (or, for lballoc, in the API server): the agent has then seen all of it.
 *
 * - proxy-nftables: Services with EndpointSlices replaced and moved; the kernel is the host's nftables.
 * - proxy-ipvs: the same objects; the host has no IPVS (nor dummy links), so the agent runs cli-with-stand-ins.ts,
 *   whose IPVS stands in (stand-ins.ts) while the proxy's ipsets, iptables chains and VIPs are real. A round ends
 *   when its last Service is in the real kube-router-svip-prt set and out of kube-router-svip-noep (its slice seen).
 * - route-sync: remote Nodes replaced, their pod CIDRs handed to route-sync by the stand-in nodeRoutesPlugin (in place
 *   of routing-bgp, without gobgpd); the kernel's routes of route-sync's protocol are read back.
 * - lballoc: LoadBalancer Services replaced; a round ends when its last Service has its ingress IP in the API server.
 * - routing-bgp (with route-sync, as --run-router assembles them): a BIRD peer, another Node of the cluster, replaces
 *   the routes it announces (reconfigured); the agent's gobgpd learns them and route-sync puts them in the kernel. The
 *   agent's heap is measured, not gobgpd's.
 *
 * Periodic full syncs are put off (sync periods of an hour) so that none is half done when the heap is read: what is
 * measured is the event path that churn drives.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { killNetnsProcesses } from '@kube-router/netfilter';
import { ROUTE_PROTOCOL } from '@kube-router/route-sync';
import { startApiServer, waitFor, type ApiServer } from '@kube-router/testkit';
import { renderBirdConfig, startBird, type BgpRouterConfig } from '@kube-router/testkit/bgp-routers';
import { createScaleNetns, MeasuredAgent, metricValue, runner, type AfterGc, type MeasuredAgentOptions, type ScaleNetns } from './measured-agent.js';
import { CHURN_NAMESPACE, NodeWorld, SCALE_NODE, ServiceWorld, type ServiceProbe } from './scale-world.js';

/** The CLI entry with IPVS and a BGP-less routing plugin standing in (cli-with-stand-ins.ts). */
export const STAND_IN_CLI = fileURLToPath(new URL('./cli-with-stand-ins.ts', import.meta.url));

/** How long one round may take to reach the kernel: a loaded 2-core machine, with a bench beside it. */
const ROUND_TIMEOUT_MS = 120_000;
const POLL_MS = 25;

export interface PluginChurn {
  /** The plugin measured; the test and the bench figure name it. */
  readonly plugin: 'proxy-nftables' | 'proxy-ipvs' | 'route-sync' | 'lballoc' | 'routing-bgp';
  /** The controllers it runs, whose sync failures must not grow under churn. */
  readonly controllers: readonly string[];
  /** The executables this host needs for it (beside root and `ip`). */
  readonly tools: readonly string[];
  /** What the churn is, for a report. */
  readonly describe: string;
  /** The CLI it runs from (bundled, for the bench): STAND_IN_CLI, or by default the reference CLI. */
  readonly entry?: string;
  /** How the measured agent runs it, but for the entry and a bundle. */
  agentOptions(netns: ScaleNetns): Omit<MeasuredAgentOptions, 'entry' | 'bundle'>;
  /** Seeds the API server (and any peer) before the agent starts; returns the rounds to run once it is ready. */
  seed(api: ApiServer, netns: ScaleNetns): Promise<ChurnRounds>;
}

export interface ChurnRounds {
  /** One round of churn, resolved once its last change has reached the kernel (or the API server). */
  round(): Promise<void>;
  /** Stops and removes what seed started beside the agent. */
  close?(): Promise<void>;
}

const SERVICES = 400;
const SERVICE_ENDPOINTS = 3;
const SERVICE_CHURN = { replace: 200, update: 50 };
const SERVICE_CHURN_TEXT = `${SERVICES} ClusterIP Services of ${SERVICE_ENDPOINTS} endpoints; each round replaces ${SERVICE_CHURN.replace} of them (new names, cluster IPs and endpoints) and moves the endpoints of ${SERVICE_CHURN.update}`;

async function sh(script: string, netns: string): Promise<string> {
  return (await runner.run({ command: 'sh', args: ['-c', script], netns, timeoutMs: 30_000 })).stdout;
}

async function inIpset(netns: string, set: string, member: string): Promise<boolean> {
  const result = await runner.run({ command: 'ipset', args: ['test', set, member], netns, okExitCodes: [1], timeoutMs: 30_000 });
  return result.exitCode === 0;
}

async function serviceRounds(api: ApiServer, netns: ScaleNetns, type: 'ClusterIP' | 'LoadBalancer', endpoints: number, applied: (probe: ServiceProbe) => Promise<boolean>): Promise<ChurnRounds> {
  const world = new ServiceWorld(api, { services: SERVICES, endpoints, type });
  world.seed(netns.netnsIp);
  return {
    async round() {
      const probe = world.churn(SERVICE_CHURN);
      await waitFor(`${CHURN_NAMESPACE}/${probe.name} applied`, () => applied(probe), { timeoutMs: ROUND_TIMEOUT_MS, intervalMs: POLL_MS });
    },
  };
}

export const proxyNftablesChurn: PluginChurn = {
  plugin: 'proxy-nftables',
  controllers: ['proxy'],
  tools: ['nft', 'conntrack'],
  describe: SERVICE_CHURN_TEXT,
  agentOptions: () => ({ features: { 'service-proxy': true }, extraFlags: ['--use-nftables-for-service-proxy=true', '--ipvs-sync-period=1h'] }),
  seed: (api, netns) =>
    serviceRounds(api, netns, 'ClusterIP', SERVICE_ENDPOINTS, async (probe) =>
      // The DNAT of the endpoint chain of the round's last slice.
      (await sh('nft list table ip kube-router-proxy', netns.name)).includes(`dnat to ${probe.endpointIp}:${probe.targetPort}`),
    ),
};

export const proxyIpvsChurn: PluginChurn = {
  plugin: 'proxy-ipvs',
  controllers: ['proxy'],
  tools: ['ipset', 'iptables', 'ip6tables', 'conntrack', 'bridge', 'sysctl'],
  describe: `${SERVICE_CHURN_TEXT}; IPVS stands in (the host has none), its ipsets, chains and VIPs are real`,
  entry: STAND_IN_CLI,
  agentOptions: () => ({ features: { 'service-proxy': true }, extraFlags: ['--ipvs-sync-period=1h'] }),
  seed: (api, netns) =>
    serviceRounds(api, netns, 'ClusterIP', SERVICE_ENDPOINTS, async (probe) => {
      const member = `${probe.clusterIp},tcp:${probe.port}`;
      return (await inIpset(netns.name, 'kube-router-svip-prt', member)) && !(await inIpset(netns.name, 'kube-router-svip-noep', member));
    }),
};

const LB_SERVICES = 200;
const LB_CHURN = { replace: 100, update: 0 };

export const lballocChurn: PluginChurn = {
  plugin: 'lballoc',
  controllers: ['lballoc'],
  tools: [],
  describe: `${LB_SERVICES} LoadBalancer Services; each round replaces ${LB_CHURN.replace} of them`,
  agentOptions: () => ({ features: { loadbalancer: true }, extraFlags: ['--loadbalancer-ip-range=10.255.0.0/24', '--loadbalancer-sync-period=1h'] }),
  async seed(api) {
    const world = new ServiceWorld(api, { services: LB_SERVICES, endpoints: 0, type: 'LoadBalancer' });
    world.seed('192.0.2.1');
    const allocated = (name: string) => {
      const status = api.get('v1', 'Service', CHURN_NAMESPACE, name)?.status as { loadBalancer?: { ingress?: { ip?: string }[] } } | undefined;
      return status?.loadBalancer?.ingress?.[0]?.ip !== undefined;
    };
    return {
      async round() {
        const probe = world.churn(LB_CHURN);
        await waitFor(`an ingress IP for ${CHURN_NAMESPACE}/${probe.name}`, () => allocated(probe.name), { timeoutMs: ROUND_TIMEOUT_MS, intervalMs: POLL_MS });
      },
    };
  },
};

const REMOTE_NODES = 400;
const NODE_CHURN = 200;

export const routeSyncChurn: PluginChurn = {
  plugin: 'route-sync',
  controllers: ['route-sync', 'node-routes'],
  tools: [],
  describe: `${REMOTE_NODES} routes to other Nodes' pod CIDRs; each round replaces ${NODE_CHURN} of the Nodes (other names and pod CIDRs)`,
  entry: STAND_IN_CLI,
  agentOptions: (netns) => ({
    features: { router: true },
    extraFlags: ['--injected-routes-sync-period=1h'],
    env: { KUBE_ROUTER_STAND_IN_GATEWAY: netns.hostIp },
  }),
  async seed(api, netns) {
    const world = new NodeWorld(api, REMOTE_NODES, netns.hostIp);
    world.seed();
    return { round: async () => waitForRoutes(netns.name, world.churn(NODE_CHURN)) };
  },
};

/** The destinations of route-sync's routes in the kernel (its protocol number marks them). */
async function kernelRoutes(netns: string): Promise<Set<string>> {
  return new Set((await sh(`ip route show proto ${ROUTE_PROTOCOL}`, netns)).split('\n').map((line) => line.split(' ')[0] ?? ''));
}

/** Until a round's last added route is in the kernel and its last removed one gone. */
async function waitForRoutes(netns: string, probe: { added: string; removed: string }): Promise<void> {
  await waitFor(
    `the route to ${probe.added} in the kernel and the one to ${probe.removed} gone`,
    async () => {
      const now = await kernelRoutes(netns);
      return now.has(probe.added) && !now.has(probe.removed);
    },
    { timeoutMs: ROUND_TIMEOUT_MS, intervalMs: POLL_MS },
  );
}

const LEARNED_ROUTES = 400;
const LEARNED_CHURN = 200;
const CLUSTER_ASN = 64_512;

/**
 * A BIRD peer for routing-bgp: another Node of the cluster (iBGP, the agent's full mesh) in a namespace of its own,
 * joined to the agent's by a veth pair with a /30 (10.252.0.0/16, picked like createScaleNetns' /30), announcing
 * static routes. Its addresses: the agent's side and the peer's.
 */
async function createPeerLink(netns: ScaleNetns): Promise<{ name: string; agentIp: string; peerIp: string; remove(): Promise<void> }> {
  const id = netns.name.slice('sc-'.length);
  const name = `${netns.name}-p`;
  const base = (Number.parseInt(id, 16) % 16_384) * 4;
  const address = (offset: number) => `10.252.${((base + offset) >> 8) & 255}.${(base + offset) & 255}`;
  const [agentIp, peerIp] = [address(1), address(2)];
  const remove = async () => {
    // A daemon left in the namespace (a failed start) would keep its veth alive.
    await killNetnsProcesses(runner, name);
    await runner.run({ command: 'ip', args: ['netns', 'del', name], okExitCodes: [1, 255] }).catch(() => undefined);
  };
  try {
    await runner.run({ command: 'ip', args: ['netns', 'add', name] });
    await runner.run({ command: 'ip', args: ['link', 'add', `sc${id}p`, 'type', 'veth', 'peer', 'name', `sc${id}q`, 'netns', name], netns: netns.name });
    await sh(`ip addr add ${agentIp}/30 dev sc${id}p && ip link set sc${id}p up`, netns.name);
    await sh(`ip addr add ${peerIp}/30 dev sc${id}q && ip link set sc${id}q up && ip link set lo up`, name);
  } catch (error) {
    await remove();
    throw error;
  }
  return { name, agentIp, peerIp, remove };
}

/** Pod CIDRs the BIRD peer announces: /26s in 10.192.0.0/11, the slot in the last two octets, the generation in the second. */
function learnedCidr(index: number, generation: number): string {
  return `10.${192 + (generation % 32)}.${index >> 2}.${(index & 3) * 64}/26`;
}

export const routingBgpChurn: PluginChurn = {
  plugin: 'routing-bgp',
  controllers: ['routing-bgp', 'route-sync'],
  tools: ['gobgpd', 'bird', 'birdc'],
  describe: `${LEARNED_ROUTES} routes learned from a BIRD peer (a Node, iBGP) by the agent's gobgpd, handed to route-sync; each round the peer replaces ${LEARNED_CHURN} of them`,
  agentOptions: () => ({
    features: { router: true },
    extraFlags: [
      '--enable-ipv6=false',
      // Nothing outside the namespace: no CNI file, no tunnels, no masquerade rules.
      '--enable-cni=false',
      '--enable-overlay=false',
      '--enable-pod-egress=false',
      '--routes-sync-period=1h',
      '--injected-routes-sync-period=1h',
    ],
  }),
  async seed(api, netns) {
    const link = await createPeerLink(netns);
    const node = (name: string, address: string, podCidr: string) =>
      api.create({ apiVersion: 'v1', kind: 'Node', metadata: { name }, spec: { podCIDR: podCidr, podCIDRs: [podCidr] }, status: { addresses: [{ type: 'InternalIP', address }] } });
    try {
      node(SCALE_NODE, link.agentIp, '10.244.0.0/24');
      node('sc-bgp-peer', link.peerIp, '10.244.1.0/24');
      const generations = Array.from({ length: LEARNED_ROUTES }, () => 0);
      const config = (): BgpRouterConfig => ({
        netns: link.name,
        routerId: link.peerIp,
        asn: CLUSTER_ASN,
        neighbors: [{ address: link.agentIp, asn: CLUSTER_ASN }],
        staticRoutes: generations.map((generation, index) => ({ prefix: learnedCidr(index, generation) })),
      });
      const bird = await startBird(config());
      let cursor = 0;
      return {
        async round() {
          let probe: { added: string; removed: string } | undefined;
          for (let i = 0; i < LEARNED_CHURN; i++) {
            const index = cursor++ % LEARNED_ROUTES;
            const removed = learnedCidr(index, generations[index]!);
            generations[index]!++;
            probe = { added: learnedCidr(index, generations[index]!), removed };
          }
          // BIRD reads its configuration again and withdraws and announces the difference (its README: bird.conf in dir).
          await writeFile(join(bird.dir, 'bird.conf'), renderBirdConfig(config()));
          // A configuration BIRD refuses would show only as the round's timeout: its reply says why.
          const reply = await bird.cli('configure');
          if (!/Reconfigur/.test(reply)) throw new Error(`BIRD did not take its configuration: ${reply}`);
          await waitForRoutes(netns.name, probe!);
        },
        async close() {
          try {
            await bird.stop();
          } finally {
            await link.remove();
          }
        },
      };
    } catch (error) {
      await link.remove();
      throw error;
    }
  },
};

export const PLUGIN_CHURNS: readonly PluginChurn[] = [proxyNftablesChurn, proxyIpvsChurn, routeSyncChurn, lballocChurn, routingBgpChurn];

export interface ChurnGrowth {
  /** After the warm-up rounds, and after the measured ones: heap and RSS after a full collection. */
  before: AfterGc;
  after: AfterGc;
  growthBytes: number;
  /** Failed syncs of the plugin's controllers from start to the end of the churn. */
  syncFailures: number;
  readyMs: number;
  /** The agent's last log lines, which name what failed. */
  recentLogs: string;
}

/**
 * Runs `churn` against a measured agent in a fresh network namespace and API server: `warmupRounds` rounds (caches,
 * pools and code paths warmed), the heap after GC, `measuredRounds` more, the heap after GC again. Removes what it
 * made. `bundle`: an agent bundled from the churn's `entry` (bundleAgent), else the agent runs from source.
 */
export async function heapGrowthUnderChurn(
  churn: PluginChurn,
  options: { warmupRounds: number; measuredRounds: number; bundle?: string; onRound?: (round: number) => void },
): Promise<ChurnGrowth> {
  const dir = await mkdtemp(join(tmpdir(), 'sc-churn-'));
  let netns: ScaleNetns | undefined;
  let api: ApiServer | undefined;
  let agent: MeasuredAgent | undefined;
  let rounds: ChurnRounds | undefined;
  try {
    netns = await createScaleNetns();
    api = await startApiServer({ host: netns.hostIp, port: 0, historyLimit: 100_000 });
    rounds = await churn.seed(api, netns);
    agent = new MeasuredAgent(netns, await api.writeKubeconfig(join(dir, 'kubeconfig')), {
      ...churn.agentOptions(netns),
      ...(churn.entry !== undefined && { entry: churn.entry }),
      ...(options.bundle !== undefined && { bundle: options.bundle }),
      // V8 drops the bytecode of functions not run for a while (start-up code) after a few collections: 1.7-2.0 MiB
      // of the bundled proxy-nftables agent's heap went that way during the measured rounds, enough to hide a leak.
      nodeOptions: ['--no-flush-bytecode'],
    });
    const readyMs = await agent.waitUntilReady(180_000);
    for (let round = 0; round < options.warmupRounds; round++) {
      await rounds.round();
      options.onRound?.(round);
    }
    const before = await agent.afterGc();
    for (let round = 0; round < options.measuredRounds; round++) {
      await rounds.round();
      options.onRound?.(options.warmupRounds + round);
    }
    const after = await agent.afterGc();
    const metrics = await agent.metrics();
    const syncFailures = churn.controllers.reduce(
      (sum, controller) => sum + (metricValue(metrics, 'kube_router_controller_sync_failures_total', { controller }) ?? Number.NaN),
      0,
    );
    return { before, after, growthBytes: after.heapUsedBytes - before.heapUsedBytes, syncFailures, readyMs, recentLogs: agent.recentLogs() };
  } catch (error) {
    if (agent) throw new Error(`${churn.plugin}: ${(error as Error).message}\nthe agent's last lines:\n${agent.recentLogs()}`, { cause: error });
    throw error;
  } finally {
    // Every step, whatever the one before did: a failed close must not leave the namespace, its daemons or the files.
    for (const step of [() => agent?.stop(), () => rounds?.close?.(), () => api?.close(), () => netns?.remove(), () => rm(dir, { recursive: true, force: true })]) {
      await Promise.resolve()
        .then(step)
        .catch((error: unknown) => console.error(`${churn.plugin}: a cleanup step failed (what it made may be left):`, error));
    }
  }
}
