import { afterEach, describe, expect, it } from 'vitest';
import { freePort, labSkipReason, startApiServer, type ApiServer, waitFor } from '@kube-router/testkit';
import { bgpRoutersSkipReason, startBird, startFrr, type BgpRouter, type BgpRouterConfig, type BgpRouterNeighbor } from '@kube-router/testkit/bgp-routers';
import { createMesh, injectedRoutes, nodeObject, routingAgent, tcpConnect, tcpListener, type Mesh, type MeshNode, type RoutingAgent } from './testing/mesh.js';
import { killGobgpd, routerNamespace, routerPrefix, type RouterNamespace } from './testing/external-router.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const b64 = (text: string) => Buffer.from(text).toString('base64');
const DAEMONS = { bird: startBird, frr: startFrr } as const;

describe.each(['bird', 'frr'] as const)('routing-bgp interop with %s', (kind) => {
  const skipReason = labSkipReason('gobgpd') ?? bgpRoutersSkipReason(kind);
  describe.skipIf(skipReason)(`external peers against a real ${kind}${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
    let mesh: Mesh | undefined;
    let server: ApiServer | undefined;
    let kubeconfig = '';
    let bgpPort = 0;
    let agents: RoutingAgent[] = [];
    let namespaces: RouterNamespace[] = [];
    let routers: BgpRouter[] = [];
    const cleanups: (() => void)[] = [];
    const prefix = routerPrefix();

    afterEach(async () => {
      for (const cleanup of cleanups.splice(0)) cleanup();
      for (const agent of agents) await agent.stop().catch(() => undefined);
      agents = [];
      for (const router of routers) await router.stop().catch(() => undefined);
      routers = [];
      for (const namespace of namespaces) await namespace.teardown();
      namespaces = [];
      await server?.close();
      server = undefined;
      await mesh?.teardown();
      mesh = undefined;
    });

    async function cluster(count: number, annotations: (index: number) => Record<string, string> = () => ({})) {
      mesh = await createMesh(count);
      server = await startApiServer({ port: 0 });
      kubeconfig = await server.writeKubeconfig();
      mesh.nodes.forEach((node, i) => server!.create(nodeObject(node, annotations(i))));
      bgpPort = await freePort();
      return mesh;
    }

    /** The daemon in its own namespace; every neighbor is a node, on the nodes' --bgp-port, with a short hold time. */
    type DaemonOptions = Omit<Partial<BgpRouterConfig>, 'neighbors'> & {
      index?: number;
      behindGateway?: boolean;
      asn: number;
      neighbors: (Partial<BgpRouterNeighbor> & { address: string })[];
    };
    async function daemon(options: DaemonOptions) {
      const { index = 1, behindGateway = false, neighbors, ...config } = options;
      const namespace = await routerNamespace(mesh!, prefix, { index, behindGateway });
      namespaces.push(namespace);
      const router = await DAEMONS[kind]({
        netns: namespace.netns,
        routerId: namespace.address,
        staticRoutes: [{ prefix: '10.99.1.0/24' }],
        ...config,
        neighbors: neighbors.map((n) => ({ asn: 64_512, port: bgpPort, holdTimeSeconds: 9, ...n })),
      });
      routers.push(router);
      return { router, address: namespace.address };
    }

    async function startAgent(node: MeshNode, options: Parameters<typeof routingAgent>[3] = {}) {
      const agent = routingAgent(mesh!, node, kubeconfig, { bgpPort, ...options });
      agents.push(agent);
      await agent.start();
      return agent;
    }

    const hasRoute = async (router: BgpRouter, from: string, destination: string) =>
      (await router.routes()).some((r) => r.from === from && r.prefix === destination);

    it('eBGP with TCP MD5 from kube-router.io/peers, and an eBGP peer from the options; routes both ways; a flap is recovered', async () => {
      const mesh = await cluster(2, (i): Record<string, string> =>
        i === 0 ? { 'kube-router.io/peers': `- {remoteip: 10.77.0.101, remoteasn: 65010, password: ${b64('md5-secret')}}` } : {},
      );
      const [n1, n2] = mesh.nodes as [MeshNode, MeshNode];
      const { router, address } = await daemon({
        asn: 65_010,
        neighbors: [{ address: n1.address, password: 'md5-secret' }, { address: n2.address }],
      });
      const started = Date.now();
      await startAgent(n1);
      await startAgent(n2, { peerRouters: [{ address, asn: 65_010 }] });
      await router.waitForRoute(n1.podCidr, (r) => r.from === n1.address && r.nextHop === n1.address);
      await router.waitForRoute(n2.podCidr, (r) => r.from === n2.address && r.nextHop === n2.address);
      // eBGP: the AS path is the cluster's ASN.
      expect((await router.routes()).find((r) => r.from === n1.address && r.prefix === n1.podCidr)?.asPath).toEqual([64_512]);
      await waitFor('node-1 routes the daemon’s prefix', async () => (await injectedRoutes(n1.netns)).get('10.99.1.0/24') === address);
      console.log(`${kind}: eBGP with MD5 and without converged ${Date.now() - started} ms after start`);

      await router.resetSession(n1.address);
      const flapped = Date.now();
      await router.waitForSession(n1.address, 'established', 30_000);
      await router.waitForRoute(n1.podCidr, (r) => r.from === n1.address, 30_000);
      await waitFor('node-1 routes the daemon’s prefix after the flap', async () => (await injectedRoutes(n1.netns)).get('10.99.1.0/24') === address, 30_000);
      console.log(`${kind}: a session reset recovered in ${Date.now() - flapped} ms`);
    }, 120_000);

    it('a wrong MD5 password never establishes', async () => {
      const mesh = await cluster(1);
      const n1 = mesh.nodes[0]!;
      const { router, address } = await daemon({ asn: 65_010, neighbors: [{ address: n1.address, password: 'right' }] });
      await startAgent(n1, { peerRouters: [{ address, asn: 65_010, password: 'wrong' }] });
      await sleep(8_000);
      expect((await router.session(n1.address))?.state).not.toBe('established');
      expect(await hasRoute(router, n1.address, n1.podCidr)).toBe(false);
    }, 60_000);

    it('eBGP multihop: a daemon one hop away, with --peer-router-multihop-ttl', async () => {
      const mesh = await cluster(1);
      const n1 = mesh.nodes[0]!;
      const { router, address } = await daemon({ asn: 65_010, behindGateway: true, neighbors: [{ address: n1.address, multihopTtl: 2, passive: true }] });
      await startAgent(n1, { peerRouters: [{ address, asn: 65_010 }], peerMultihopTtl: 2 });
      await router.waitForRoute(n1.podCidr, (r) => r.from === n1.address);
      // The next hop is the daemon, off the node's subnet: no direct route (as kube-router without an overlay).
      expect((await injectedRoutes(n1.netns)).has('10.99.1.0/24')).toBe(false);
    }, 60_000);

    it('iBGP: the daemon as route reflector for nodes without a mesh; they reach each other’s pods through it', async () => {
      const mesh = await cluster(2, (): Record<string, string> => ({ 'kube-router.io/peer.ips': '10.77.0.101', 'kube-router.io/peer.asns': '64512' }));
      const [n1, n2] = mesh.nodes as [MeshNode, MeshNode];
      const { router } = await daemon({
        asn: 64_512,
        neighbors: [n1, n2].map((n) => ({ address: n.address, routeReflectorClient: true, export: 'all' as const })),
      });
      const started = Date.now();
      await startAgent(n1, { enableIbgp: false });
      await startAgent(n2, { enableIbgp: false });
      await router.waitForRoute(n1.podCidr, (r) => r.from === n1.address);
      await waitFor('the nodes learn each other’s pod CIDRs by reflection', async () =>
        (await injectedRoutes(n1.netns)).get(n2.podCidr) === n2.address && (await injectedRoutes(n2.netns)).get(n1.podCidr) === n1.address);
      console.log(`${kind}: route reflection by the daemon converged ${Date.now() - started} ms after start`);
      cleanups.push(await tcpListener(n2.podNetns, 8080));
      expect(await tcpConnect(n1.podNetns, n2.podIp, 8080)).toBe('open');
    }, 90_000);

    it('a node as route reflector: the daemon, its iBGP peer, gets a client’s pod CIDR reflected with the next hop kept', async () => {
      const mesh = await cluster(2, (i): Record<string, string> =>
        i === 0
          ? { 'kube-router.io/rr.server': '42', 'kube-router.io/peer.ips': '10.77.0.101', 'kube-router.io/peer.asns': '64512' }
          : { 'kube-router.io/rr.client': '42' },
      );
      const [n1, n2] = mesh.nodes as [MeshNode, MeshNode];
      const { router } = await daemon({ asn: 64_512, neighbors: [{ address: n1.address }] });
      await startAgent(n1);
      await startAgent(n2);
      // Without reflection an iBGP speaker never passes on what another iBGP peer sent it.
      const reflected = await router.waitForRoute(n2.podCidr, (r) => r.from === n1.address);
      expect(reflected.nextHop).toBe(n2.address);
      await router.waitForRoute(n1.podCidr, (r) => r.from === n1.address && r.nextHop === n1.address);
    }, 60_000);

    it('graceful restart: the daemon keeps the node’s routes across an agent restart; without it they go at once', async () => {
      const mesh = await cluster(2);
      const [n1, n2] = mesh.nodes as [MeshNode, MeshNode];
      const { router, address } = await daemon({
        asn: 65_010,
        gracefulRestartTimeSeconds: 120,
        neighbors: [{ address: n1.address, gracefulRestart: true }, { address: n2.address, gracefulRestart: true }],
      });
      const peerRouters = [{ address, asn: 65_010 }];
      const grOptions = { peerRouters, gracefulRestart: true, gracefulRestartTimeSeconds: 60, gracefulRestartDeferralTimeSeconds: 5 };
      const a1 = await startAgent(n1, grOptions);
      await startAgent(n2, { peerRouters });
      await router.waitForRoute(n1.podCidr, (r) => r.from === n1.address);
      await router.waitForRoute(n2.podCidr, (r) => r.from === n2.address);

      await a1.stop();
      agents = agents.filter((a) => a !== a1);
      const stopped = Date.now();
      await router.waitForSession(n1.address, 'active', 15_000).catch(() => undefined);
      // Kept while the node is away (the daemon holds them as stale for the node's restart time)...
      await sleep(3_000);
      expect(await hasRoute(router, n1.address, n1.podCidr)).toBe(true);
      await startAgent(n1, grOptions);
      // ...and until the new agent's session is up again.
      while ((await router.session(n1.address))?.state !== 'established') {
        expect(await hasRoute(router, n1.address, n1.podCidr)).toBe(true);
        if (Date.now() - stopped > 60_000) throw new Error('node-1 did not peer again within 60 s');
        await sleep(200);
      }
      await router.waitForRoute(n1.podCidr, (r) => r.from === n1.address);
      console.log(`${kind}: graceful restart: node-1's pod CIDR kept for the ${Date.now() - stopped} ms its agent was away`);

      // The control: node-2 without graceful restart loses its routes on the daemon when its gobgpd is killed.
      await killGobgpd(n2.netns);
      await router.waitForRoutes('node-2’s pod CIDR gone', (routes) => !routes.some((r) => r.from === n2.address && r.prefix === n2.podCidr), 5_000);
    }, 150_000);
  });
});
