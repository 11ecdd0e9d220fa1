import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasTool } from '../lab/preconditions.js';
import { waitFor } from '../wait.js';
import { bgpRoutersSkipReason, startBird, startFrr, stopAllBgpRouters, type BgpRouter } from './index.js';
import { createTopology, startGobgpd, type Gobgp, type Topology } from './testing/topology.js';

const gobgpMissing = hasTool('gobgpd') && hasTool('gobgp') ? undefined : 'missing gobgpd/gobgp';
const birdSkip = bgpRoutersSkipReason('bird') ?? gobgpMissing;
const frrSkip = bgpRoutersSkipReason('frr') ?? gobgpMissing;

/** Standard community "a:b" as gobgp's JSON has it. */
const community = (text: string) => {
  const [high, low] = text.split(':').map(Number);
  return high! * 65_536 + low!;
};

afterAll(stopAllBgpRouters);

describe.skipIf(birdSkip)(`BIRD as an eBGP peer of gobgpd${birdSkip ? ` (skipped: ${birdSkip})` : ''}`, () => {
  let topology: Topology;
  let gobgp: Gobgp;
  let bird: BgpRouter;

  beforeAll(async () => {
    topology = await createTopology(['gobgp', 'bird'], 91);
    const { gobgp: g, bird: b } = topology.members;
    gobgp = await startGobgpd(g!.netns, 65100, g!.address, [
      { address: b!.address, asn: 65001, password: 'md5-secret' },
      { address: b!.address6, asn: 65001 },
    ]);
    bird = await startBird({
      netns: b!.netns,
      routerId: b!.address,
      asn: 65001,
      neighbors: [
        { address: g!.address, asn: 65100, password: 'md5-secret', gracefulRestart: true, import: { reject: ['10.199.0.0/16'] } },
        { address: g!.address6, asn: 65100 },
      ],
      staticRoutes: [
        { prefix: '10.150.0.0/24', communities: ['65001:100', '65001:200'], largeCommunities: ['65001:1:2'] },
        { prefix: 'fd00:150::/64' },
      ],
    });
  });

  afterAll(async () => {
    await bird?.stop();
    await gobgp?.stop();
    await topology?.teardown();
  });

  it('establishes an MD5-signed session and an IPv6 one', async () => {
    const { gobgp: g } = topology.members;
    const session = await bird.waitForSession(g!.address);
    expect(session).toMatchObject({ neighbor: g!.address, remoteAsn: 65100, state: 'established' });
    await bird.waitForSession(g!.address6);
    expect((await bird.sessions()).map((s) => s.state)).toEqual(['established', 'established']);
  });

  it('learns gobgp paths with next hop, AS path and communities, and honours its import rejects', async () => {
    const { gobgp: g } = topology.members;
    await gobgp.cli(['global', 'rib', 'add', '-a', 'ipv4', '10.160.0.0/24', 'community', '65100:7', 'aspath', '65100,64999']);
    await gobgp.cli(['global', 'rib', 'add', '-a', 'ipv4', '10.199.1.0/24']);
    await gobgp.cli(['global', 'rib', 'add', '-a', 'ipv6', 'fd00:160::/64']);
    const route = await bird.waitForRoute('10.160.0.0/24');
    expect(route).toMatchObject({ nextHop: g!.address, from: g!.address, communities: ['65100:7'], best: true });
    expect(Math.abs(route.receivedAt! - Date.now())).toBeLessThan(30_000);
    // gobgp puts its own ASN in front of the AS path it was given.
    expect(route.asPath).toEqual([65100, 65100, 64999]);
    const route6 = await bird.waitForRoute('fd00:160::/64');
    expect(route6).toMatchObject({ nextHop: g!.address6, from: g!.address6 });
    // The rejected prefix was sent together with the accepted one; it never shows up.
    expect((await bird.routes()).map((r) => r.prefix)).not.toContain('10.199.1.0/24');
    await gobgp.cli(['global', 'rib', 'del', '-a', 'ipv4', '10.160.0.0/24']);
    await bird.waitForNoRoute('10.160.0.0/24');
  });

  it('exports its static routes with their communities', async () => {
    const { bird: b } = topology.members;
    await waitFor('gobgp to learn 10.150.0.0/24', async () => (await gobgp.rib())['10.150.0.0/24'] !== undefined);
    const [path] = (await gobgp.rib())['10.150.0.0/24']!;
    const attributes = new Map(path!.attrs.map((attribute) => [attribute.type, attribute]));
    expect(attributes.get(3)?.nexthop).toBe(b!.address);
    expect(attributes.get(2)?.as_paths?.[0]?.asns).toEqual([65001]);
    expect(attributes.get(8)?.communities).toEqual([community('65001:100'), community('65001:200')]);
    expect(attributes.get(32)?.value).toEqual([{ ASN: 65001, LocalData1: 1, LocalData2: 2 }]);
    await waitFor('gobgp to learn fd00:150::/64', async () => (await gobgp.rib('ipv6'))['fd00:150::/64'] !== undefined);
  });

  it('recovers a session reset (a peer flap)', async () => {
    const { gobgp: g } = topology.members;
    await gobgp.cli(['global', 'rib', 'add', '-a', 'ipv4', '10.161.0.0/24']);
    await bird.waitForRoute('10.161.0.0/24');
    await bird.resetSession(g!.address);
    await bird.waitForSession(g!.address, 'established');
    await bird.waitForRoute('10.161.0.0/24');
  });

  it('times out with what it saw', async () => {
    await expect(bird.waitForRoute('10.222.0.0/24', undefined, 300)).rejects.toThrow(/timed out after 300 ms waiting for bird route to 10\.222\.0\.0\/24 \(seen: none\)/);
  });

  it('stop() kills the daemon and removes its files', async () => {
    const { bird: b } = topology.members;
    const other = await startBird({ netns: b!.netns, routerId: '10.91.0.99', asn: 65009, listenPort: 1179, neighbors: [] });
    expect(other.pid).toBeGreaterThan(0);
    expect(existsSync(other.dir)).toBe(true);
    const pid = other.pid!;
    await other.stop();
    expect(other.pid).toBeUndefined();
    expect(existsSync(other.dir)).toBe(false);
    expect(() => process.kill(pid, 0)).toThrow();
    await other.stop();
  });

  it('fails to start with the daemon’s complaint', async () => {
    const { bird: b } = topology.members;
    await expect(startBird({ netns: b!.netns, routerId: '10.91.0.98', asn: 65009, neighbors: [], extraConfig: 'this is not bird;' })).rejects.toThrow(
      /bird exited with 1: .*syntax error/s,
    );
  });
});

describe.skipIf(frrSkip)(`FRR as an iBGP route reflector client of gobgpd${frrSkip ? ` (skipped: ${frrSkip})` : ''}`, () => {
  let topology: Topology;
  let gobgp: Gobgp;
  let frr: BgpRouter;

  beforeAll(async () => {
    topology = await createTopology(['gobgp', 'frr'], 92);
    const { gobgp: g, frr: f } = topology.members;
    gobgp = await startGobgpd(g!.netns, 65200, g!.address, [
      { address: f!.address, asn: 65200, password: 'frr-md5' },
      { address: f!.address6, asn: 65200 },
    ]);
    frr = await startFrr({
      netns: f!.netns,
      routerId: f!.address,
      asn: 65200,
      neighbors: [
        { address: g!.address, asn: 65200, password: 'frr-md5', routeReflectorClient: true, gracefulRestart: true, import: { reject: ['10.199.0.0/16'] } },
        { address: g!.address6, asn: 65200 },
      ],
      staticRoutes: [
        { prefix: '10.170.0.0/24', communities: ['65200:1'], largeCommunities: ['65200:3:4'] },
        { prefix: 'fd00:170::/64', communities: ['65200:6'] },
      ],
    });
  });

  afterAll(async () => {
    await frr?.stop();
    await gobgp?.stop();
    await topology?.teardown();
  });

  it('establishes the MD5-signed iBGP session and an IPv6 one', async () => {
    const { gobgp: g } = topology.members;
    expect(await frr.waitForSession(g!.address)).toMatchObject({ remoteAsn: 65200, state: 'established' });
    expect(await frr.waitForSession(g!.address6)).toMatchObject({ remoteAsn: 65200, state: 'established' });
  });

  it('exchanges IPv6 paths with their global next hop', async () => {
    const { gobgp: g, frr: f } = topology.members;
    await gobgp.cli(['global', 'rib', 'add', '-a', 'ipv6', 'fd00:180::/64']);
    expect(await frr.waitForRoute('fd00:180::/64')).toMatchObject({ nextHop: g!.address6, from: g!.address6 });
    await waitFor('gobgp to learn fd00:170::/64', async () => (await gobgp.rib('ipv6'))['fd00:170::/64'] !== undefined);
    const [path] = (await gobgp.rib('ipv6'))['fd00:170::/64']!;
    expect(JSON.stringify(path!.attrs)).toContain(f!.address6);
  });

  it('learns gobgp paths with next hop, local preference and communities, and honours its import rejects', async () => {
    const { gobgp: g } = topology.members;
    await gobgp.cli(['global', 'rib', 'add', '-a', 'ipv4', '10.180.0.0/24', 'community', '65200:9', 'local-pref', '150']);
    await gobgp.cli(['global', 'rib', 'add', '-a', 'ipv4', '10.199.2.0/24']);
    const route = await frr.waitForRoute('10.180.0.0/24');
    expect(route).toMatchObject({ nextHop: g!.address, from: g!.address, asPath: [], communities: ['65200:9'], localPref: 150, best: true });
    expect((await frr.routes()).map((r) => r.prefix)).not.toContain('10.199.2.0/24');
    await gobgp.cli(['global', 'rib', 'del', '-a', 'ipv4', '10.180.0.0/24']);
    await frr.waitForNoRoute('10.180.0.0/24');
  });

  it('exports its static routes with their communities', async () => {
    const { frr: f } = topology.members;
    await waitFor('gobgp to learn 10.170.0.0/24', async () => (await gobgp.rib())['10.170.0.0/24'] !== undefined);
    const [path] = (await gobgp.rib())['10.170.0.0/24']!;
    const attributes = new Map(path!.attrs.map((attribute) => [attribute.type, attribute]));
    expect(attributes.get(3)?.nexthop).toBe(f!.address);
    expect(attributes.get(8)?.communities).toEqual([community('65200:1')]);
    expect(attributes.get(32)?.value).toEqual([{ ASN: 65200, LocalData1: 3, LocalData2: 4 }]);
  });

  it('recovers a session reset (a peer flap)', async () => {
    const { gobgp: g } = topology.members;
    await gobgp.cli(['global', 'rib', 'add', '-a', 'ipv4', '10.181.0.0/24']);
    await frr.waitForRoute('10.181.0.0/24');
    await frr.resetSession(g!.address);
    await frr.waitForSession(g!.address, 'established');
    await frr.waitForRoute('10.181.0.0/24');
  });
});

describe.skipIf(birdSkip)(`BIRD keeping a graceful-restart peer's routes${birdSkip ? ` (skipped: ${birdSkip})` : ''}`, () => {
  let topology: Topology;
  let bird: BgpRouter | undefined;
  const gobgps: Gobgp[] = [];

  beforeAll(async () => {
    topology = await createTopology(['gobgp', 'bird'], 93);
  });

  afterAll(async () => {
    await bird?.stop();
    for (const gobgp of gobgps) await gobgp.stop().catch(() => undefined);
    await topology?.teardown();
  });

  /** BIRD peered with a gobgpd that announces 10.190.0.0/24 and, with `gracefulRestartSeconds`, graceful restart. */
  async function peered(gracefulRestartSeconds?: number): Promise<Gobgp> {
    const { gobgp: g, bird: b } = topology.members;
    const gobgp = await startGobgpd(g!.netns, 65300, g!.address, [{ address: b!.address, asn: 65001, ...(gracefulRestartSeconds && { gracefulRestartSeconds }) }]);
    gobgps.push(gobgp);
    bird ??= await startBird({ netns: b!.netns, routerId: b!.address, asn: 65001, neighbors: [{ address: g!.address, asn: 65300, gracefulRestart: true }] });
    await bird.waitForSession(g!.address);
    await gobgp.cli(['global', 'rib', 'add', '-a', 'ipv4', '10.190.0.0/24']);
    await bird.waitForRoute('10.190.0.0/24');
    return gobgp;
  }

  it('drops the routes of a killed gobgpd that did not announce graceful restart', async () => {
    const { gobgp: g } = topology.members;
    await (await peered()).kill();
    await bird!.waitForSession(g!.address, 'active', 10_000);
    await bird!.waitForNoRoute('10.190.0.0/24', 5_000);
  });

  it('keeps the routes of a killed gobgpd that announced it until it is back, then drops what it did not send again', async () => {
    const { gobgp: g } = topology.members;
    await (await peered(60)).kill();
    // The session is down (BIRD tries to connect again) and the path is still there, kept as stale.
    await bird!.waitForSession(g!.address, 'active', 10_000);
    expect((await bird!.routes()).map((route) => route.prefix)).toContain('10.190.0.0/24');
    const second = await startGobgpd(g!.netns, 65300, g!.address, [{ address: topology.members.bird!.address, asn: 65001, gracefulRestartSeconds: 60 }]);
    gobgps.push(second);
    await bird!.waitForSession(g!.address);
    await second.cli(['global', 'rib', 'add', '-a', 'ipv4', '10.191.0.0/24']);
    await bird!.waitForRoute('10.191.0.0/24');
    // The restarted speaker did not send 10.190.0.0/24 again: BIRD drops the stale path after its End-of-RIB.
    await bird!.waitForNoRoute('10.190.0.0/24');
  });
});
