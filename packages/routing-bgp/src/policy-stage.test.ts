import type { V1Node } from '@kubernetes/client-node';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { PolicyStage } from './policy-stage.js';
import type { ReflectorRole } from './route-reflector.js';
import { FakeGobgpd } from './testing/fake-gobgpd.js';
import { fakeNodes, meshNode } from './testing/nodes.js';

function harness(options: { role?: ReflectorRole; externalPeers?: string[]; announcedVips?: string[] } = {}) {
  const gobgpd = new FakeGobgpd();
  const kube = fakeNodes([]);
  const stage = new PolicyStage({
    nodeName: 'node-1',
    cluster: kube.cluster,
    settings: { enableIbgp: true, advertisePodCidr: true, overrideNextHop: false },
    gobgp: () => gobgpd.client(),
    role: () => options.role ?? { kind: 'none' },
    announcedVips: () => Promise.resolve(new Set(options.announcedVips ?? [])),
    externalPeers: () => options.externalPeers ?? [],
    logger: pino({ level: 'silent' }),
  });
  return { gobgpd, warnings: kube.warnings, stage };
}

const me: V1Node = meshNode('node-1', '10.0.0.1');
const prefixSet = (gobgpd: FakeGobgpd, name: string) => gobgpd.policy?.definedSets.find((set) => set.name === name)?.prefixes?.map((p) => p.ipPrefix);

describe('PolicyStage', () => {
  it('is not applied until gobgpd took a policy; until then no peer may be added', async () => {
    const { stage } = harness();
    expect(stage.applied).toBe(false);
    expect(() => stage.requireApplied()).toThrow(/^policy not applied/);
    await stage.sync({ node: me, podCidrs: ['10.1.0.0/24'], mesh: new Set(), peers: [] });
    expect(stage.applied).toBe(true);
    expect(() => stage.requireApplied()).not.toThrow();
    stage.forget();
    expect(stage.applied).toBe(false);
  });

  it('internal are the mesh’s addresses; every other peer gobgpd has is external, also one added by hand with gobgp’s CLI', async () => {
    const { gobgpd, stage } = harness({ externalPeers: ['192.0.2.1'] });
    // gobgpd's peers as the sync's PeerTable lists them: a mesh session, and 192.0.2.7 that this controller never added.
    await stage.sync({ node: me, podCidrs: ['10.1.0.0/24'], mesh: new Set(['10.0.0.2', '10.0.0.3']), peers: ['10.0.0.2', '192.0.2.7'] });
    expect(gobgpd.policyHistory.at(-1)).toMatchObject({
      iBGPpeerset: ['10.0.0.2/32', '10.0.0.3/32'],
      externalpeerset: ['192.0.2.1/32', '192.0.2.7/32'],
    });
  });

  it('exports the VIPs wanted and those still being withdrawn', async () => {
    const { gobgpd, stage } = harness({ externalPeers: ['192.0.2.1'], announcedVips: ['10.96.0.9/32'] });
    await stage.sync({ node: me, podCidrs: ['10.1.0.0/24'], vips: new Set(['10.96.0.1/32']), mesh: new Set(), peers: [] });
    expect(prefixSet(gobgpd, 'servicevipsdefinedset')?.sort()).toEqual(['10.96.0.1/32', '10.96.0.9/32']);
  });

  it('a bad node annotation: a Warning, a failure, and the rest of the policy still applied', async () => {
    const { gobgpd, warnings, stage } = harness();
    const node = meshNode('node-1', '10.0.0.1', { 'kube-router.io/node.bgp.communities': 'not-a-community' });
    await expect(stage.sync({ node, podCidrs: ['10.1.0.0/24'], mesh: new Set(), peers: [] })).rejects.toThrow(/node\/node-1\/kube-router.io\/node.bgp.communities/);
    expect(warnings).toEqual([expect.stringMatching(/^node-1 InvalidAnnotation: kube-router.io\/node.bgp.communities/)]);
    expect(stage.applied).toBe(true);
    expect(prefixSet(gobgpd, 'podcidrdefinedset')).toEqual(['10.1.0.0/24']);
  });

  it('a route reflector server gets no policy: gobgpd’s defaults pass on what its clients send', async () => {
    const { gobgpd, stage } = harness({ role: { kind: 'server', clusterId: '0.0.0.1' } });
    await stage.sync({ node: me, podCidrs: ['10.1.0.0/24'], mesh: new Set(['10.0.0.2']), peers: [] });
    expect(gobgpd.policy).toEqual({ definedSets: [], policies: [] });
    expect(gobgpd.assignments.get('EXPORT')).toEqual({ policies: [], defaultAction: 'ACCEPT' });
    expect(stage.applied).toBe(true);
  });
});
