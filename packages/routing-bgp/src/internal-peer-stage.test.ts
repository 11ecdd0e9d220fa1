import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { InternalPeerStage } from './internal-peer-stage.js';
import type { ReflectorRole } from './route-reflector.js';
import { PeerTable } from './peer-sync.js';
import { FakeGobgpd } from './testing/fake-gobgpd.js';
import { fakeNodes, meshNode } from './testing/nodes.js';

const self = { primary: '10.0.0.1', byFamily: { ipv4: '10.0.0.1' } };
const mesh = [meshNode('node-1', '10.0.0.1'), meshNode('node-2', '10.0.0.2'), meshNode('node-3', '10.0.0.3')];
const unreadable = meshNode('node-3', 'not-an-address');

function harness(options: { enableIbgp?: boolean; role?: ReflectorRole; policyApplied?: boolean } = {}) {
  const gobgpd = new FakeGobgpd();
  const kube = fakeNodes(mesh);
  let policyApplied = options.policyApplied ?? true;
  const stage = new InternalPeerStage({
    nodeName: 'node-1',
    cluster: kube.cluster,
    settings: { enableIbgp: options.enableIbgp ?? true, nodesFullMesh: true },
    peering: { bgpPort: 1790, holdTimeSeconds: 90, peerMultihopTtl: 0 },
    gobgp: () => gobgpd.client(),
    role: () => options.role ?? { kind: 'none' },
    requirePolicy: () => {
      if (!policyApplied) throw new Error('policy not applied');
    },
    syncTime: { startTimer: () => () => 0 },
    logger: pino({ level: 'silent' }),
  });
  const sync = async (externalAddresses: ReadonlySet<string> = new Set()) =>
    stage.sync(stage.plan(self, 64_512), externalAddresses, await PeerTable.list(gobgpd.client()));
  return { gobgpd, kube, stage, sync, applyPolicy: () => (policyApplied = true) };
}

describe('InternalPeerStage', () => {
  it('peers with every other Node from this node’s address, and owns those sessions', async () => {
    const { gobgpd, stage, sync } = harness();
    await sync();
    expect([...gobgpd.peers.keys()].sort()).toEqual(['10.0.0.2', '10.0.0.3']);
    expect(gobgpd.peers.get('10.0.0.2')).toMatchObject({ peerAsn: 64_512, localAddress: '10.0.0.1', remotePort: 1790, families: ['AFI_IP'] });
    expect([...stage.owned].sort()).toEqual(['10.0.0.2', '10.0.0.3']);
    expect(stage.wants('10.0.0.3')).toBe(true);
  });

  it('adds no session while gobgpd has no policy', async () => {
    const { gobgpd, sync, applyPolicy } = harness({ policyApplied: false });
    await expect(sync()).rejects.toThrow('policy not applied');
    expect(gobgpd.peers.size).toBe(0);
    applyPolicy();
    await sync();
    expect(gobgpd.peers.size).toBe(2);
  });

  it('a Node whose address does not parse: a Warning, a failure, and no session removed until it reads again', async () => {
    const { gobgpd, kube, stage, sync } = harness();
    await sync();
    kube.setNodes([mesh[0]!, unreadable]);
    await expect(sync()).rejects.toThrow(/node\/node-3/);
    expect(kube.warnings).toEqual([expect.stringMatching(/^node-3 InvalidNodeAddress: not peering with node node-3/)]);
    // node-2 left the cluster, but its deletion waits: the unreadable Node may be the one whose peer would go.
    expect([...gobgpd.peers.keys()].sort()).toEqual(['10.0.0.2', '10.0.0.3']);
    expect(stage.wants('10.0.0.2')).toBe(true);
    kube.setNodes([mesh[0]!, mesh[2]!]);
    await sync();
    expect([...gobgpd.peers.keys()]).toEqual(['10.0.0.3']);
    expect(stage.wants('10.0.0.2')).toBe(false);
  });

  it('hands a session that became an external peer’s over to that stage without deleting it', async () => {
    const { gobgpd, kube, stage, sync } = harness();
    await sync();
    kube.setNodes(mesh.slice(0, 2));
    gobgpd.calls.length = 0;
    await sync(new Set(['10.0.0.3']));
    expect(gobgpd.calls).toEqual([]);
    expect([...stage.owned]).toEqual(['10.0.0.2']);
  });

  it('as a route reflector client, peers only with reflectors', () => {
    const { kube, stage } = harness({ role: { kind: 'client', clusterId: '0.0.0.1' } });
    kube.setNodes([mesh[0]!, meshNode('node-2', '10.0.0.2', { 'kube-router.io/rr.server': '1' }), mesh[2]!]);
    expect(stage.plan(self, 64_512).wanted.map((p) => p.config.neighborAddress)).toEqual(['10.0.0.2']);
  });

  it('without iBGP wants no mesh; unplanned, the sessions it holds still count as internal', async () => {
    expect(harness({ enableIbgp: false }).stage.plan(self, 64_512)).toEqual({ wanted: [], problems: [], addresses: new Set() });
    const { stage, sync } = harness();
    await sync();
    expect(stage.unplanned().addresses).toEqual(new Set(['10.0.0.2', '10.0.0.3']));
  });

  it('after a gobgpd restart, adds its peers again', async () => {
    const { gobgpd, stage, sync } = harness();
    await sync();
    gobgpd.peers.clear();
    stage.forget();
    expect(stage.owned.size).toBe(0);
    await sync();
    expect(gobgpd.peers.size).toBe(2);
  });
});
