// 5,000 pod CIDRs learned from a peer: a plain gobgpd in node-2's namespace holds them before the session comes up,
// so they arrive in one burst of UPDATEs. Measured in this one run: first UPDATE seen by node-1's gobgpd -> every route
// handed to route-sync -> every route in node-1's kernel, and a bare `ip -batch` of the same routes for the ratio.
import { spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { startApiServer, waitFor } from '@kube-router/testkit';
import { reportBench } from '@kube-router/testkit/bench';
import { GobgpClient } from '../src/gobgp-api.js';
import { podCidrPath } from '../src/paths.js';
import { createMesh, nodeObject, routingAgent, sh } from '../src/testing/mesh.js';

const ROUTES = Number(process.env.ROUTES ?? 5_000);
const cidrs = Array.from({ length: ROUTES }, (_, i) => `10.${100 + Math.floor(i / 256)}.${i % 256}.0/24`);
const countKernelRoutes = async (netns: string) => Number((await sh('sh', ['-c', 'ip route show proto 17 | wc -l'], netns)).trim());

const mesh = await createMesh(2);
const [n1, n2] = mesh.nodes as [(typeof mesh.nodes)[0], (typeof mesh.nodes)[0]];
const server = await startApiServer({ port: 0 });
const injectorSocket = `${mesh.dir}/injector.sock`;
const injector = spawn('ip', ['netns', 'exec', n2.netns, 'gobgpd', `--api-hosts=unix://${injectorSocket}`, '--pprof-disable'], { stdio: 'ignore' });
const injectorApi = new GobgpClient({ target: `unix://${injectorSocket}`, callTimeoutMs: 30_000 });
let exitCode = 0;
try {
  await waitFor('injector gobgpd', () => injectorApi.waitReady(500).then(() => true), 10_000);
  await injectorApi.startBgp({ asn: 64512, routerId: n2.address, listenPort: 179 });
  for (const cidr of cidrs) await injectorApi.addPath(podCidrPath(cidr, n2.address));

  server.create(nodeObject(n1));
  server.create(nodeObject(n2));
  const agent = routingAgent(mesh, n1, await server.writeKubeconfig(), { bgpPort: 179, syncPeriodMs: 60_000 });
  await agent.start();
  await waitFor('node-1 gobgpd configured', async () => {
    const api = new GobgpClient({ target: `unix://${agent.apiSocket}` });
    try {
      return ((await api.getBgp())?.asn ?? 0) !== 0;
    } finally {
      api.close();
    }
  }, 20_000);

  // The first UPDATE: the first learned path node-1's gobgpd reports, watched on its own API.
  const watcher = new GobgpClient({ target: `unix://${agent.apiSocket}` });
  let firstUpdateAt = 0;
  let allInRibAt = 0;
  const seen = new Set<string>();
  const stopWatch = watcher.watchEvents({
    onPaths: (paths) => {
      const learned = paths.filter((p) => p.neighborIp && p.neighborIp !== '<nil>');
      if (!firstUpdateAt && learned.length > 0) firstUpdateAt = performance.now();
      for (const path of learned) seen.add(String(path.nlri?.prefix));
      if (!allInRibAt && seen.size >= ROUTES) allInRibAt = performance.now();
    },
    onPeerChange: () => undefined,
    onEnd: () => undefined,
  });
  await injectorApi.addPeer({ neighborAddress: n1.address, peerAsn: 64512, remotePort: 179, holdTimeSeconds: 9, families: ['AFI_IP'] });

  let handedAt = 0;
  await waitFor('every route handed over', () => {
    if (agent.routes.wantedRoutes().length >= ROUTES) handedAt = performance.now();
    return handedAt > 0;
  }, 120_000);
  await waitFor('every route in the kernel', async () => (await countKernelRoutes(n1.netns)) >= ROUTES, 120_000);
  const kernelAt = performance.now();
  stopWatch();
  watcher.close();
  await agent.stop();

  // The bare baseline: the same routes with one `ip -batch` in a namespace of the same shape.
  await sh('ip', ['route', 'flush', 'proto', '17'], n1.netns);
  const batch = cidrs.map((c) => `route replace ${c} via ${n2.address} proto 17`).join('\n');
  const batchFile = `${mesh.dir}/routes.batch`;
  const { writeFile } = await import('node:fs/promises');
  await writeFile(batchFile, `${batch}\n`);
  const bareStart = performance.now();
  await sh('ip', ['-batch', batchFile], n1.netns);
  const bareMs = performance.now() - bareStart;
  if ((await countKernelRoutes(n1.netns)) < ROUTES) throw new Error('bare ip -batch did not install every route');
  await rm(batchFile);

  const toHanded = handedAt - firstUpdateAt;
  const toKernel = kernelAt - firstUpdateAt;
  const fmt = (n: number) => n.toFixed(0);
  console.log(`routing-bgp: ${ROUTES} pod CIDRs learned from one iBGP peer (gobgpd 3.10), node-1 in its own netns`);
  console.log(`  first UPDATE -> all best paths reported by gobgpd's watch: ${fmt(allInRibAt - firstUpdateAt)} ms`);
  console.log(`  first UPDATE -> all handed to route-sync: ${fmt(toHanded)} ms (${fmt(ROUTES / (toHanded / 1000))} routes/s)`);
  console.log(`  first UPDATE -> all in the kernel:        ${fmt(toKernel)} ms (${fmt(ROUTES / (toKernel / 1000))} routes/s)`);
  console.log(`  of which after gobgpd's last best path:  ${fmt(handedAt - allInRibAt)} ms to route-sync, ${fmt(kernelAt - allInRibAt)} ms to the kernel`);
  console.log(`  bare ip -batch of the same routes:        ${fmt(bareMs)} ms`);
  console.log(`  ratio (first UPDATE -> kernel) / bare ip -batch: ${(toKernel / bareMs).toFixed(1)}x`);
  console.log(`  ratio (gobgpd's last best path -> kernel) / bare ip -batch: ${((kernelAt - allInRibAt) / bareMs).toFixed(1)}x`);
  reportBench({
    plugin: 'routing-bgp',
    figures: [
      { name: 'learn: first UPDATE -> kernel / bare ip -batch', value: toKernel / bareMs, unit: 'x', better: 'lower' },
      { name: "learn: gobgpd's last best path -> kernel / bare ip -batch", value: (kernelAt - allInRibAt) / bareMs, unit: 'x', better: 'lower' },
      { name: 'learn: first UPDATE -> kernel', value: toKernel, unit: 'ms', better: 'lower' },
    ],
  });
} catch (error) {
  console.error(error);
  exitCode = 1;
} finally {
  injectorApi.close();
  injector.kill('SIGKILL');
  await server.close();
  await mesh.teardown();
}
process.exit(exitCode);
