import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { policyChainName } from '@kube-router/netpol';
import { addServerAndClients, missingForRealTests, runNetpolEnforcementSuite, startWorld } from '@kube-router/netpol-testing';
import type { HarnessEnforcer, World } from '@kube-router/netpol-testing';
import { mismatches, periodicSyncMismatches } from '@kube-router/testkit/netpol-conformance';
import { EGRESS_MAP } from './names.js';
import { nftablesBackend } from './testing/backend.js';

runNetpolEnforcementSuite(nftablesBackend);

const missing = missingForRealTests(nftablesBackend);

/** What only this backend has: verdict maps for the dispatch, and chains known by the `[rev ...]` tag of their rules. */
describe.skipIf(missing !== undefined)(`netpol-nftables tables in a lab node${missing ? ` (skipped: ${missing})` : ''}`, () => {
  let world: World;
  let enforcer: HarnessEnforcer;

  const enforce = async () => {
    const outcome = await enforcer.syncNow();
    if (!outcome.ok) throw outcome.error;
  };

  beforeAll(async () => {
    world = await startWorld(nftablesBackend);
    await addServerAndClients(world);
    enforcer = await world.start({ scheduler: false });
    await enforce();
  }, 90_000);

  afterAll(async () => {
    await world?.close();
  }, 60_000);

  it('writes a chain repaired in place again under a new handle, and adopts an edit made before any read-back of its tag', async () => {
    world.policy('web', 'server-from-client', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }] }],
    });
    await enforce();
    // The periodic sync reads the tables back: what it sees is what the chains hold as written.
    expect((await enforcer.controller.runObservedSync('periodic')).ok).toBe(true);
    const table = ['ip', 'kube-router-filter-ipv4'] as const;
    const chain = policyChainName('web/server-from-client', 'ingress', 'ipv4');
    const chainRules = async () => {
      const listing = JSON.parse(await world.inNode('nft', ['-a', '-j', 'list', 'chain', ...table, chain])) as {
        nftables: { rule?: { handle: number; comment?: string } }[];
      };
      return listing.nftables.flatMap((item) => (item.rule ? [item.rule] : []));
    };
    const allowEverySource = () => nftablesBackend.kernel.allowEverySource(world.inNode, chain);
    const periodicRepairs = async () =>
      expect(
        await periodicSyncMismatches(enforcer.controller, world.lab, [
          { from: 'other/client', to: 'web/server', port: 80, open: false },
          { from: 'web/client', to: 'web/server', port: 80, open: true },
        ]),
      ).toEqual([]);
    const [rule] = (await chainRules()) as [{ handle: number }];
    await allowEverySource();
    await periodicRepairs();
    const [written] = (await chainRules()) as [{ handle: number }];
    expect(written.handle).not.toBe(rule.handle);
    // Written again (a new handle), the chain is left by the next periodic sync.
    expect((await enforcer.controller.runObservedSync('periodic')).ok).toBe(true);
    expect(await chainRules()).toEqual([written]);

    // Edited before any read-back of its new tag, the chain is adopted as found (a restarted agent could not tell
    // either). A later edit is repaired, and the chain written then is left as written: the next read-back compares
    // it with what was written, not with what was adopted.
    world.policy('web', 'server-from-client', {
      podSelector: { matchLabels: { app: 'server' } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }], ports: [{ port: 80 }] }],
    });
    await enforce();
    const [retagged] = (await chainRules()) as [{ handle: number }];
    await allowEverySource();
    expect((await enforcer.controller.runObservedSync('periodic')).ok).toBe(true);
    await world.inNode('nft', ['add', 'rule', ...table, chain, 'counter']);
    await periodicRepairs();
    const rewritten = await chainRules();
    expect(rewritten.map((r) => r.handle)).not.toContain(retagged.handle);
    expect((await enforcer.controller.runObservedSync('periodic')).ok).toBe(true);
    expect(await chainRules()).toEqual(rewritten);
    world.deletePolicy('web', 'server-from-client');
    await enforce();
  });

  it('dispatches through verdict maps: base chains keep their rule count as pods and policies come', async () => {
    const baseRules = async () => {
      const listing = await world.inNode('nft', ['-j', 'list', 'table', 'ip', 'kube-router-filter-ipv4']);
      const rules = (JSON.parse(listing) as { nftables: { rule?: { chain: string } }[] }).nftables.flatMap((item) => (item.rule ? [item.rule.chain] : []));
      return rules.filter((chain) => chain.startsWith('KUBE-ROUTER-')).length;
    };
    const idle = await baseRules();
    world.policy('web', 'isolate-all', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] });
    world.policy('other', 'isolate-all', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] });
    await enforce();
    expect(await baseRules()).toBe(idle);
    const maps = await world.inNode('nft', ['list', 'map', 'ip', 'kube-router-filter-ipv4', EGRESS_MAP]);
    expect(maps.match(/jump KUBE-POD-FW-/g)).toHaveLength(3);
    world.deletePolicy('web', 'isolate-all');
    world.deletePolicy('other', 'isolate-all');
    await enforce();
    expect(await mismatches(world.lab, [{ from: 'other/client', to: 'web/server', port: 80, open: true }])).toEqual([]);
  });
});
