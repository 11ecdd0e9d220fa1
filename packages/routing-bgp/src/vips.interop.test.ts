/**
 * Interop of Service VIP advertisement and the export policy with BIRD 2 and FRR as the external router: an operator's
 * router in its own namespace on the mesh's underlay, in another AS, peered through the plugin's `peerRouters`.
 * Namespaces: the mesh's `tbgp<run>`, the router's `bv<run>-rt` and the Kubernetes namespace `bv<run>`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { freePort, labSkipReason, startApiServer, type ApiServer, waitFor } from '@kube-router/testkit';
import { bgpRoutersSkipReason, startBird, startFrr, type BgpRouter, type BgpRouterConfig } from '@kube-router/testkit/bgp-routers';
import { GobgpClient } from './gobgp-api.js';
import { pathPrefix } from './paths.js';
import { createMesh, injectedRoutes, nodeObject, routingAgent, sh, type Mesh, type RoutingAgent } from './testing/mesh.js';

const CLUSTER_ASN = 64512;
const ROUTER_ASN = 65100;
const ROUTER_ADDRESS = '10.77.0.150';

const daemons = { bird: startBird, frr: startFrr } as const;

for (const kind of ['bird', 'frr'] as const) {
  const skipReason = labSkipReason('gobgpd') ?? bgpRoutersSkipReason(kind);
  describe.skipIf(skipReason)(`Service VIPs and policies seen by ${kind} as an eBGP peer${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
    let mesh: Mesh | undefined;
    let server: ApiServer | undefined;
    let router: BgpRouter | undefined;
    let agent: RoutingAgent | undefined;
    let routerNetns: string | undefined;
    const run = Math.random().toString(36).slice(2, 6);
    const namespace = `bv${run}`;

    afterEach(async () => {
      await agent?.stop().catch(() => undefined);
      agent = undefined;
      await router?.stop();
      router = undefined;
      if (routerNetns) await sh('ip', ['netns', 'delete', routerNetns]).catch(() => undefined);
      routerNetns = undefined;
      await server?.close();
      server = undefined;
      await mesh?.teardown();
      mesh = undefined;
    });

    /** One node peered with the router; the router announces `staticRoutes`. */
    async function setUp(annotations: Record<string, string>, staticRoutes: string[] = []) {
      mesh = await createMesh(1);
      const node = mesh.nodes[0]!;
      routerNetns = `bv${run}-rt`;
      await sh('ip', ['netns', 'add', routerNetns]);
      await sh('ip', ['link', 'set', 'lo', 'up'], routerNetns);
      await sh('ip', ['link', 'add', 'eth0', 'netns', routerNetns, 'type', 'veth', 'peer', 'name', `bv${run}rt`, 'netns', `${mesh.prefix}-ul`]);
      await sh('ip', ['link', 'set', `bv${run}rt`, 'master', 'br0', 'up'], `${mesh.prefix}-ul`);
      await sh('ip', ['addr', 'add', `${ROUTER_ADDRESS}/24`, 'dev', 'eth0'], routerNetns);
      await sh('ip', ['link', 'set', 'eth0', 'up'], routerNetns);

      const bgpPort = await freePort();
      const config: BgpRouterConfig = {
        netns: routerNetns,
        routerId: ROUTER_ADDRESS,
        asn: ROUTER_ASN,
        listenPort: bgpPort,
        neighbors: [{ address: node.address, asn: CLUSTER_ASN, port: bgpPort, holdTimeSeconds: 9, export: staticRoutes.length > 0 ? 'static' : 'none' }],
        staticRoutes: staticRoutes.map((prefix) => ({ prefix })),
      };
      router = await daemons[kind](config);

      server = await startApiServer({ port: 0 });
      server.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
      server.create(nodeObject(node, annotations));
      agent = routingAgent(mesh, node, await server.writeKubeconfig(), {
        bgpPort,
        advertiseLoadBalancerIp: true,
        peerRouters: [{ address: ROUTER_ADDRESS, asn: ROUTER_ASN, port: bgpPort }],
      });
      await agent.start();
      await router.waitForSession(node.address);
      return { node, router, server, agent };
    }

    const loadBalancer = (name: string, clusterIp: string, ingressIp: string) => {
      server!.create({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { namespace, name },
        spec: { type: 'LoadBalancer', clusterIP: clusterIp, clusterIPs: [clusterIp], ports: [{ port: 80, protocol: 'TCP', targetPort: 8080 }] },
      });
      server!.updateStatus({ ...server!.get('v1', 'Service', namespace, name)!, status: { loadBalancer: { ingress: [{ ip: ingressIp }] } } });
    };

    it('learns a LoadBalancer address within seconds of allocation, with communities and prepends, and loses it on delete', async () => {
      const { node, router, server } = await setUp({
        'kube-router.io/node.bgp.communities': '65000:100,64512:7',
        // The node's own ASN, as kube-router documents it: FRR's enforce-first-as accepts it.
        'kube-router.io/path-prepend.as': String(CLUSTER_ASN),
        'kube-router.io/path-prepend.repeat-n': '2',
      });

      const podCidr = await router.waitForRoute(node.podCidr);
      expect(podCidr.asPath).toEqual([CLUSTER_ASN, CLUSTER_ASN, CLUSTER_ASN]);
      expect([...podCidr.communities].sort()).toEqual(['64512:7', '65000:100']);

      const allocated = Date.now();
      loadBalancer('web', '10.96.0.80', '198.51.100.80');
      const vip = await router.waitForRoute('198.51.100.80/32', undefined, 10_000);
      const learnedMs = Date.now() - allocated;
      console.log(`${kind} learned the LoadBalancer IP ${learnedMs} ms after allocation`);
      expect(learnedMs).toBeLessThan(5_000);
      expect(vip).toMatchObject({ nextHop: node.address, asPath: [CLUSTER_ASN, CLUSTER_ASN, CLUSTER_ASN] });
      expect([...vip.communities].sort()).toEqual(['64512:7', '65000:100']);
      // --advertise-cluster-ip is off.
      expect((await router.routes()).some((r) => r.prefix === '10.96.0.80/32')).toBe(false);

      const deleted = Date.now();
      server.delete('v1', 'Service', namespace, 'web');
      await router.waitForNoRoute('198.51.100.80/32', 10_000);
      console.log(`${kind} lost the LoadBalancer IP ${Date.now() - deleted} ms after the Service was deleted`);
      expect((await router.routes()).some((r) => r.prefix === node.podCidr)).toBe(true);
    }, 90_000);

    it('does not import from it our Service VIP, its default route or a customimportreject CIDR, and keeps the rest', async () => {
      const { node, agent } = await setUp({ 'kube-router.io/node.bgp.customimportreject': '192.168.0.0/16' }, [
        '198.51.100.81/32',
        '0.0.0.0/0',
        '192.168.10.0/24',
        '203.0.113.0/24',
      ]);
      loadBalancer('web', '10.96.0.81', '198.51.100.81');
      // The router prefers its own static route; ours is there beside it.
      await router!.waitForRoutes('our VIP', (routes) => routes.some((r) => r.prefix === '198.51.100.81/32' && r.from === node.address), 10_000);
      await waitFor('the accepted route in the kernel', async () => (await injectedRoutes(node.netns)).get('203.0.113.0/24') === ROUTER_ADDRESS);
      const client = new GobgpClient({ target: `unix://${agent.apiSocket}` });
      try {
        const fromRouter = (await client.listGlobalPaths('AFI_IP')).filter((p) => p.neighborIp === ROUTER_ADDRESS).map((p) => pathPrefix(p));
        expect(fromRouter).toEqual(['203.0.113.0/24']);
      } finally {
        client.close();
      }
      const routes = await injectedRoutes(node.netns);
      for (const rejected of ['198.51.100.81/32', 'default', '192.168.10.0/24']) expect(routes.has(rejected), rejected).toBe(false);
    }, 90_000);
  });
}
