import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { freePort, labSkipReason, startApiServer, waitFor, type ApiServer } from '@kube-router/testkit';
import { GobgpClient } from './gobgp-api.js';
import { podCidrPath } from './paths.js';
import { createMesh, injectedRoutes, nodeObject, routingAgent, type Mesh, type RoutingAgent } from './testing/mesh.js';

const skipReason = labSkipReason('gobgpd');

/** `count` /24s from 10.100.0.0 on: a peer's burst. */
const cidrs = (count: number, from = 0) => Array.from({ length: count }, (_, i) => `10.${100 + ((from + i) >> 8)}.${(from + i) & 255}.0/24`);

describe.skipIf(skipReason)(`learned routes from a peer's burst, real gobgpd${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  let mesh: Mesh | undefined;
  let server: ApiServer | undefined;
  let agent: RoutingAgent | undefined;
  let peer: ChildProcess | undefined;
  let peerApi: GobgpClient | undefined;

  afterEach(async () => {
    vi.restoreAllMocks();
    await agent?.stop().catch(() => undefined);
    peerApi?.close();
    peer?.kill('SIGKILL');
    await server?.close();
    await mesh?.teardown();
    agent = server = mesh = peer = peerApi = undefined;
  });

  it('3,000 paths in one burst reach the kernel through a fresh table from gobgpd; 1,000 withdrawn in one burst really go', async () => {
    const watches = vi.spyOn(GobgpClient.prototype, 'watchEvents');
    mesh = await createMesh(2);
    const [n1, n2] = mesh.nodes as [Mesh['nodes'][0], Mesh['nodes'][0]];
    const bgpPort = await freePort();
    // node-2 is a plain gobgpd holding the paths before the session comes up, so they arrive as one burst.
    const socket = `${mesh.dir}/peer.sock`;
    peer = spawn('ip', ['netns', 'exec', n2.netns, 'gobgpd', `--api-hosts=unix://${socket}`, '--pprof-disable'], { stdio: 'ignore' });
    peerApi = new GobgpClient({ target: `unix://${socket}`, callTimeoutMs: 30_000 });
    const api = peerApi;
    await waitFor('the peer gobgpd answers', () => api.waitReady(500).then(() => true), 10_000);
    await api.startBgp({ asn: 64512, routerId: n2.address, listenPort: bgpPort });
    const burst = cidrs(3_000);
    await api.addPathsInBulk(burst.map((cidr) => podCidrPath(cidr, n2.address)));

    server = await startApiServer({ port: 0 });
    server.create(nodeObject(n1));
    server.create(nodeObject(n2));
    agent = routingAgent(mesh, n1, await server.writeKubeconfig(), { bgpPort, syncPeriodMs: 60_000 });
    await agent.start();
    await waitFor('node-1 gobgpd has its peer', async () => {
      const own = new GobgpClient({ target: `unix://${agent!.apiSocket}` });
      try {
        return (await own.listPeers()).some((p) => p.conf?.neighborAddress === n2.address);
      } finally {
        own.close();
      }
    }, 20_000);
    const opened = watches.mock.calls.length;
    await api.addPeer({ neighborAddress: n1.address, peerAsn: 64512, remotePort: bgpPort, holdTimeSeconds: 9, families: ['AFI_IP'] });

    await waitFor('every route of the burst in the kernel', async () => (await injectedRoutes(n1.netns)).size >= 3_000, 60_000);
    const installed = await injectedRoutes(n1.netns);
    expect([...installed.keys()].filter((d) => d !== n2.podCidr).sort()).toEqual([...burst].sort());
    expect(new Set(installed.values())).toEqual(new Set([n2.address]));
    // The burst asked for gobgpd's table on a new stream at least once.
    expect(watches.mock.calls.length).toBeGreaterThan(opened);

    const withdrawn = cidrs(1_000, 1_000);
    await api.addPathsInBulk(withdrawn.map((cidr) => ({ ...podCidrPath(cidr, n2.address), isWithdraw: true })));
    await waitFor('the withdrawn routes gone from the kernel', async () => (await injectedRoutes(n1.netns)).size <= 2_000, 60_000);
    const left = await injectedRoutes(n1.netns);
    const gone = new Set(withdrawn);
    expect([...left.keys()].sort()).toEqual(burst.filter((cidr) => !gone.has(cidr)).sort());
  }, 120_000);
});
