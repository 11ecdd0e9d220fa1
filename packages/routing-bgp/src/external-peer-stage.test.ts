import type { V1Node } from '@kubernetes/client-node';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ExternalPeerStage } from './external-peer-stage.js';
import type { ExternalPeerSpec } from './external-peers.js';
import type { MeshPlan } from './internal-peer-stage.js';
import { PeerTable } from './peer-sync.js';
import { FakeGobgpd } from './testing/fake-gobgpd.js';
import { fakeNodes, meshNode } from './testing/nodes.js';

const self = { primary: '10.0.0.1', byFamily: { ipv4: '10.0.0.1' } };
const noMesh: MeshPlan = { wanted: [], problems: [], addresses: new Set() };
const annotated = (peers: string): V1Node => meshNode('node-1', '10.0.0.1', { 'kube-router.io/peers': peers });

function harness(configured: ExternalPeerSpec[] = []) {
  const gobgpd = new FakeGobgpd();
  const kube = fakeNodes([]);
  const stage = new ExternalPeerStage({
    nodeName: 'node-1',
    cluster: kube.cluster,
    configured,
    peering: { bgpPort: 1790, holdTimeSeconds: 90, peerMultihopTtl: 2 },
    gobgp: () => gobgpd.client(),
    requirePolicy: () => undefined,
    logger: pino({ level: 'silent' }),
  });
  const sync = async (node: V1Node, mesh = noMesh) => stage.sync(node, stage.plan(node, self, mesh), mesh, await PeerTable.list(gobgpd.client()));
  return { gobgpd, warnings: kube.warnings, stage, sync };
}

describe('ExternalPeerStage', () => {
  it('configures --peer-router-* peers with port 179, the multihop TTL and the password, and reads no annotation', async () => {
    const { gobgpd, stage, sync } = harness([{ address: '192.0.2.1', asn: 65_001, password: 'secret' }]);
    await sync(annotated('[{remoteip: 192.0.2.9, remoteasn: 65009}]'));
    expect([...gobgpd.peers.keys()]).toEqual(['192.0.2.1']);
    expect(gobgpd.peers.get('192.0.2.1')).toMatchObject({ remotePort: 179, ebgpMultihopTtl: 2, password: 'secret', localAddress: '10.0.0.1' });
    expect(stage.wants('192.0.2.1')).toBe(true);
    expect([...stage.owned]).toEqual(['192.0.2.1']);
  });

  it('plans the addresses that are its own: a Node’s address is the mesh’s', () => {
    const { stage } = harness([{ address: '192.0.2.1', asn: 65_001 }, { address: '10.0.0.2', asn: 64_512 }]);
    const mesh = { ...noMesh, addresses: new Set(['10.0.0.2']) };
    expect(stage.plan(annotated(''), self, mesh).addresses).toEqual(new Set(['192.0.2.1']));
  });

  it('a peer at a Node’s address is not configured: a Warning naming it, a failure, and the others are configured', async () => {
    const { gobgpd, warnings, sync } = harness([{ address: '192.0.2.1', asn: 65_001 }, { address: '10.0.0.2', asn: 64_512 }]);
    const mesh = { ...noMesh, addresses: new Set(['10.0.0.2']) };
    await expect(sync(annotated(''), mesh)).rejects.toThrow(/node\/node-1\/external-peers: options: peer 10.0.0.2 is a Node of the cluster/);
    expect([...gobgpd.peers.keys()]).toEqual(['192.0.2.1']);
    expect(warnings).toEqual([expect.stringMatching(/^node-1 InvalidExternalPeer: an external BGP peer entry is not used \(the other peers are configured\)/)]);
  });

  it('keeps every peer while an annotation entry does not parse, and removes the gone ones once it does', async () => {
    const { gobgpd, stage, sync } = harness();
    await sync(annotated('[{remoteip: 192.0.2.1, remoteasn: 65001}, {remoteip: 192.0.2.2, remoteasn: 65002}]'));
    await expect(sync(annotated('[{remoteip: 192.0.2.1, remoteasn: 65001}, {remoteip: 192.0.2.2, remoteasn: nope}]'))).rejects.toThrow(/remoteasn/);
    expect([...gobgpd.peers.keys()].sort()).toEqual(['192.0.2.1', '192.0.2.2']);
    expect(stage.wants('192.0.2.2')).toBe(true);
    await sync(annotated('[{remoteip: 192.0.2.1, remoteasn: 65001}]'));
    expect([...gobgpd.peers.keys()]).toEqual(['192.0.2.1']);
    expect(stage.wants('192.0.2.2')).toBe(false);
  });
});
